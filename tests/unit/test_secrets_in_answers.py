"""A configured key never reaches an owner through a SUCCESS (issue 31 item 3), and a provider
that raises something that is not a `ProviderError` leaves its attempt `unknown`, its text
scrubbed (issue 33, router/attempt_call.py). Through the public `Router` with scripted
in-process providers on a real SQLite file, whose every row is then searched for the key.

The rule these pin (docs/operations.md, "Secrets in provider answers"): the configured key
VALUES are scrubbed from the output before the contract judges it and before it is stored
(so a scrubbed value that breaks the schema, an enum, is a broken contract, never a stored
result that breaks it); token SHAPES in an answer are left alone (a legitimate answer may hold
one). The end-to-end search of every owner surface is tests/acceptance/test_secrets_in_answers.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from jobrouter import Router
from jobrouter.config import CertificationConfig, RouterConfig, TaskConfig
from jobrouter.providers import Completion, CompletionRequest, ErrorKind
from jobrouter.providers.redact import REDACTED, register_secret
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider, Step
from tests.unit.test_engine import (
    SETTLE,
    a_later_job_ran,
    by_provider,
    config,
    exclusive,
    open_router,
    shared,
    submit,
    url,
    with_probe,
)

KEY = "jrunitkey-" + "c4e1a9f03b7d2e58"  # no vendor's shape: only its registered value
FOREIGN = "hf_" + "Zx9cVb8nMa7sDf6gHj5kLq4w"  # token-shaped, never configured here
register_secret(KEY)  # as a provider does when it reads its key from the environment

CONTRACT = """
name: slug
version: 1
side_effects: none
prompt:
  user: "Name it."
output_schema:
  type: object
  required: [slug]
  properties:
    slug: {type: string, pattern: "^[a-z0-9-]+$"}
"""


class Raising(FakeProvider):
    """A provider with a bug: raises a plain exception (no `ProviderError`) quoting its key,
    after the request may have been sent."""

    async def complete(self, request: CompletionRequest) -> Completion:
        self.calls.append(request)
        raise RuntimeError(f"client state broken after send (key {KEY})")


def database_text(tmp_path: Path) -> str:
    """Every row of the router's SQLite file, as SQL text (read after the router closed)."""
    with sqlite3.connect(tmp_path / "r.db") as db:
        return "\n".join(db.iterdump())


def contract_config(tmp_path: Path) -> RouterConfig:
    path = tmp_path / "slug.yaml"
    path.write_text(CONTRACT)
    task = TaskConfig(contract=str(path), providers=["a", "b"], attempt_timeout=5.0)
    return config(slug=task).model_copy(
        update={"certification": CertificationConfig(required=False)}
    )


async def test_a_configured_key_in_a_winning_answer_is_scrubbed_before_it_is_stored(
    tmp_path: Path,
) -> None:
    """The key, bare and as `Bearer <key>`, in a string, a list and an object's key: the
    result, the winning attempt's output, the events and every row of the file (the outbox
    row included) hold `[redacted]` instead. Mutant: `scrub_output` removed from
    `AttemptCall._succeed` (the raw output stored) - seen failing."""
    answer: dict[str, Any] = {
        "text": f"use {KEY} with Authorization: Bearer {KEY}",
        "extra": [KEY, {KEY: 1}],
    }
    a, b = FakeProvider("a", default=Step(output=answer)), FakeProvider("b")
    async with open_router(tmp_path, config(post=shared()), {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        done = await router.wait(job.id, timeout=SETTLE)
        [attempt] = await router.attempts(job.id)
        events = await router.events(job.id)
    assert done.state is JobState.SUCCEEDED
    expected = {
        "text": f"use {REDACTED} with Authorization: Bearer {REDACTED}",
        "extra": [REDACTED, {REDACTED: 1}],
    }
    assert done.result == expected and attempt.output == expected
    assert KEY not in repr(events)
    stored = database_text(tmp_path)
    assert "outbox" in stored and REDACTED in stored
    assert KEY not in stored


async def test_a_token_shape_that_is_no_configured_key_stays_in_the_answer(
    tmp_path: Path,
) -> None:
    """The documented rule for an answer: only configured key values are scrubbed; a
    token-shaped text the router never held (an `hf_` token, `Bearer` with it) may be the
    answer an owner asked for (a code sample) and is stored as the provider wrote it.
    Mutant: `scrub_output` scrubbing with the error scrubber's patterns too (`scrub`) - seen
    failing."""
    answer = {"text": f"curl -H 'Authorization: Bearer {FOREIGN}' https://example.test"}
    a, b = FakeProvider("a", default=Step(output=answer)), FakeProvider("b")
    async with open_router(tmp_path, config(post=shared()), {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        done = await router.wait(job.id, timeout=SETTLE)
    assert done.state is JobState.SUCCEEDED and done.result == answer


async def test_a_scrubbed_value_that_breaks_the_schema_is_a_broken_contract(
    tmp_path: Path,
) -> None:
    """The contract judges the scrubbed output: a slug field (`pattern: ^[a-z0-9-]+$`) that
    quotes the key matches as the provider wrote it, but not once scrubbed (`[redacted]` has
    brackets; an enum, a length bound or a format breaks the same way). So the attempt is a
    rejected answer (failed: the task is harmless to repeat), its scrubbed output kept for
    operators, and the next provider answers. Mutant: `output_problems` given the raw
    `completion.output` (validated before scrubbing: the job succeeds with a result that
    breaks its own schema) - seen failing."""
    a = FakeProvider("a", default=Step(output={"slug": f"post-{KEY}"}))
    b = FakeProvider("b", default=Step(output={"slug": "post-tea"}))
    cfg = contract_config(tmp_path)
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": b}) as router:
        job = await router.submit("shop-1", "k1", "slug", {})
        done = await router.wait(job.id, timeout=SETTLE)
        attempts = by_provider(await router.attempts(job.id))
    assert done.state is JobState.SUCCEEDED and done.result == {"slug": "post-tea"}
    broken = attempts["a"]
    assert broken.state is AttemptState.FAILED and broken.error_kind == ErrorKind.REJECTED
    assert broken.output == {"slug": f"post-{REDACTED}"}
    assert "breaks the contract" in (broken.error_detail or "")
    assert KEY not in database_text(tmp_path)


async def test_a_provider_bug_on_an_exclusive_task_is_unknown_and_never_fails_over(
    tmp_path: Path,
) -> None:
    """A plain exception from the provider proves nothing about whether the request was
    acted on: the attempt is `unknown`, the exclusive job `unknown`, and b is never called
    (I3, I4); the exception's text, key and all, is kept scrubbed in `error_detail`.
    Mutants: the attempt recorded FAILED in that branch (b is then called and wins) - seen
    failing; the scrub of `detail` in `AttemptCall._end` removed (the key in `error_detail`
    and in the file) - seen failing."""
    a, b = Raising("a"), FakeProvider("b")
    cfg = with_probe(config(post=exclusive()))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        done = await router.wait(job.id, timeout=SETTLE)
        await a_later_job_ran(router)  # the poller has looked at the job again since
        attempts = await router.attempts(job.id)
    assert b.calls == [] and len(a.calls) == 1, "an exclusive job failed over after a bug"
    assert done.state is JobState.UNKNOWN
    [attempt] = attempts
    assert attempt.state is AttemptState.UNKNOWN and attempt.error_kind == ErrorKind.UNKNOWN
    assert attempt.error_detail == (
        f"provider raised RuntimeError: client state broken after send (key {REDACTED})"
    )
    assert KEY not in database_text(tmp_path)


async def test_a_provider_bug_on_a_harmless_task_is_unknown_and_fails_over(
    tmp_path: Path,
) -> None:
    """The same bug on a task harmless to repeat (`side_effects: none`): the attempt is still
    `unknown` (never `failed`: I3), and the next provider may run, since a second run costs
    nothing. Mutant: the attempt recorded FAILED in that branch - seen failing."""
    a, b = Raising("a"), FakeProvider("b")
    async with open_router(tmp_path, config(post=shared()), {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        done = await router.wait(job.id, timeout=SETTLE)
        attempts = by_provider(await router.attempts(job.id))
    assert done.state is JobState.SUCCEEDED and len(b.calls) == 1
    assert attempts["a"].state is AttemptState.UNKNOWN
    assert attempts["b"].state is AttemptState.SUCCEEDED


async def test_a_resolution_result_holding_the_key_is_scrubbed(tmp_path: Path) -> None:
    """An operator resolving `succeeded` with a result that quotes the key (pasted from the
    provider's dashboard): the job holds it scrubbed, like any winning answer. Mutant:
    `scrub_output` removed from router/resolution.py - seen failing."""
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b")
    async with open_router(tmp_path, config(post=exclusive()), {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.UNKNOWN
        [attempt] = await router.attempts(job.id)
        done = await router.resolve(attempt.id, "succeeded", {"text": f"posted {KEY}"}, "seen")
    assert done.state is JobState.SUCCEEDED and done.result == {"text": f"posted {REDACTED}"}
    assert KEY not in database_text(tmp_path)
