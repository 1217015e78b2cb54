"""Router.resolve: an operator says what became of an `unknown` attempt, and only of one. The
state rule is checked by the store under the job's lock (a read before it could be stale); a
`succeeded` resolution must carry a result the task's contract accepts, like any provider's
answer. Through the public Router on a real SQLite file; the store's guard on both backends is
in tests/store/test_resolve_guard.py."""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.config import CertificationConfig, EngineConfig, RouterConfig, TaskConfig
from jobrouter.errors import AttemptNotFound, InvalidTransition, ResolutionInvalid
from jobrouter.models import Attempt, Job
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider, Step

CONTRACT = Path(__file__).resolve().parents[1] / "acceptance" / "contracts" / "echo.yaml"
SETTLE_S = 60.0  # a guard only


def config() -> RouterConfig:
    return RouterConfig(
        tasks={
            "echo": TaskConfig(
                contract=str(CONTRACT), providers=["a"], max_attempts=1, attempt_timeout=0.3
            )
        },
        certification=CertificationConfig(required=False),
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
    )


async def needing_attention(router: Router) -> tuple[Job, Attempt]:
    """A job whose only attempt timed out: unknown, waiting for a person."""
    job = await router.submit("shop-1", "k1", "echo", {"text": "hello"})
    assert (await router.wait(job.id, timeout=SETTLE_S)).state is JobState.UNKNOWN
    [attempt] = await router.attempts(job.id)
    assert attempt.state is AttemptState.UNKNOWN
    return job, attempt


async def test_a_result_that_breaks_the_contract_is_refused(tmp_path: Path) -> None:
    """Kills the mutants "a succeeded resolution whose result breaks the contract is accepted"
    (the output check in router/resolution.py removed) and "succeeded without a result is
    accepted" (the `result is None` check removed: the contract's own message, `None is not
    of type 'object'`, comes back instead of naming `result`): this test then fails."""
    a = FakeProvider("a", default=Step(hang=True))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    async with Router.open(url, config(), providers={"a": a}) as router:
        job, attempt = await needing_attention(router)
        with pytest.raises(ResolutionInvalid, match="breaks the task's contract") as broken:
            await router.resolve(attempt.id, "succeeded", {"text": 42}, "seen online")
        assert broken.value.field == "result"
        with pytest.raises(ResolutionInvalid, match="result is required") as missing:
            await router.resolve(attempt.id, "succeeded", None, "seen online")
        assert missing.value.field == "result" and "None is not" not in str(missing.value)
        with pytest.raises(ResolutionInvalid, match="outcome") as wrong:
            await router.resolve(attempt.id, "posted", None, "seen online")  # type: ignore[arg-type]
        assert wrong.value.field == "outcome"
        assert (await router.get(job.id)).state is JobState.UNKNOWN
        [still] = await router.attempts(job.id)
        assert still.state is AttemptState.UNKNOWN and still.output is None
        done = await router.resolve(attempt.id, "succeeded", {"text": "posted"}, "seen online")
        assert done.state is JobState.SUCCEEDED and done.result == {"text": "posted"}


async def test_only_an_unknown_attempt_can_be_resolved(tmp_path: Path) -> None:
    """An attempt in flight (started), one that failed and one that won are not the operator's
    to resolve. Kills the mutant "Router.resolve accepts an attempt in any state" (the store's
    `only_from` guard removed: resolving the started attempt then makes it the winner)."""
    release = asyncio.Event()
    a = FakeProvider("a", steps=[Step(release=release, output={"text": "from a"})])
    cfg = config().model_copy(
        update={
            "tasks": {
                "echo": TaskConfig(
                    contract=str(CONTRACT), providers=["a"], max_attempts=1, attempt_timeout=60.0
                )
            }
        }
    )
    async with Router.open(f"sqlite:///{tmp_path / 'r.db'}", cfg, providers={"a": a}) as router:
        job = await router.submit("shop-1", "k1", "echo", {"text": "hello"})
        [started] = await router.attempts(job.id)
        assert started.state is AttemptState.STARTED
        for outcome in ("succeeded", "failed", "cancelled"):
            with pytest.raises(InvalidTransition, match="cannot go from started"):
                await router.resolve(started.id, outcome, {"text": "not so"}, "guess")  # type: ignore[arg-type]
        assert (await router.get(job.id)).state is JobState.RUNNING
        release.set()  # the provider's own answer still decides
        done = await router.wait(job.id, timeout=SETTLE_S)
        assert done.state is JobState.SUCCEEDED and done.result == {"text": "from a"}
        with pytest.raises(InvalidTransition, match="cannot go from succeeded"):
            await router.resolve(started.id, "failed", None, "too late")
        with pytest.raises(AttemptNotFound):
            await router.resolve("no-such-attempt", "failed", None, "")


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "cancelled"])
async def test_every_resolution_is_a_record(tmp_path: Path, outcome: str) -> None:
    """Whatever the outcome, the note and who resolved are kept on the attempt and in the
    job's events; a job that succeeds by resolution carries no stale error (the "check the
    provider, then `jobrouter resolve`" of its `unknown`). Kills the mutants "the
    resolution's record is dropped" (`record_resolution` not run, or the events' `resolution`
    member left out) and "finish_job_cas keeps the job's error" (`error = NULL` removed from
    it): this test then fails."""
    a = FakeProvider("a", default=Step(hang=True))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    async with Router.open(url, config(), providers={"a": a}) as router:
        job, attempt = await needing_attention(router)
        assert (await router.get(job.id)).error  # the unknown job says what to do
        result = {"text": "posted"} if outcome == "succeeded" else None
        done = await router.resolve(
            attempt.id,
            outcome,
            result,
            "seen on the shop's page",
            by="token:t-1",  # type: ignore[arg-type]
        )
        [resolved] = await router.attempts(job.id)
        assert resolved.state is AttemptState(outcome)
        assert (resolved.resolved_by, resolved.resolution_note) == (
            "token:t-1",
            "seen on the shop's page",
        )
        record = {"outcome": outcome, "note": "seen on the shop's page", "by": "token:t-1"}
        events = await router.events(job.id)
        ended = [e for e in events if e.data.get("attempt_id") == attempt.id and e.seq > 1]
        assert [e.data.get("resolution") for e in ended][-1] == record
        if outcome == "succeeded":
            assert done.state is JobState.SUCCEEDED and done.error is None
            assert (await router.get(job.id)).error is None
        else:
            assert any(
                e.kind == "job.reopened" and e.data.get("resolution") == record for e in events
            )


async def test_the_process_user_resolves_by_default(tmp_path: Path) -> None:
    """The Python API names no one: the OS user running it is who resolved (as the CLI)."""
    a = FakeProvider("a", default=Step(hang=True))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    async with Router.open(url, config(), providers={"a": a}) as router:
        job, attempt = await needing_attention(router)
        await router.resolve(attempt.id, "cancelled")
        [resolved] = await router.attempts(job.id)
        assert resolved.resolved_by == f"user:{getpass.getuser()}"
        assert resolved.resolution_note == "resolved cancelled by an operator"
