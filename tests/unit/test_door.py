"""The door: `Router.submit` refuses bad work before any row is written, on every path (the
HTTP API calls the same rule: tests/acceptance/test_http_api.py), and the provider request is
built before any attempt row, so no job ends `unknown` with its provider never called.

Each refusal test fails on the old code (f4844b9): `submit` accepted the job, wrote it and its
attempt, and the attempt ended `unknown` when its lease expired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.config import (
    CertificationConfig,
    EngineConfig,
    RouterConfig,
    SubmitConfig,
    TaskConfig,
)
from jobrouter.errors import JobRefused
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider, Step
from tests.support.store_jobs import count_jobs, create_job
from tests.support.waiting import until
from tests.unit.test_engine import SETTLE, url

CONTRACT = """
name: post
version: 1
side_effects: {side_effects}
prompt:
  user: "Post about {{{{ product.name }}}} in a {{{{ tone }}}} tone."
input_schema:
  type: object
  required: [product]
  properties:
    product: {{type: object, required: [name], properties: {{name: {{type: string}}}}}}
    tone: {{type: string}}
    tags: {{type: array, items: {{type: string}}}}
output_schema:
  type: object
  required: [text]
  properties:
    text: {{type: string}}
sampling: {{temperature: 0, max_tokens: 200}}
"""
GOOD = {"product": {"name": "tea"}, "tone": "warm"}


def contract(tmp_path: Path, side_effects: str = "external") -> Path:
    path = tmp_path / f"post_{side_effects}.yaml"
    path.write_text(CONTRACT.format(side_effects=side_effects))
    return path


def config(tmp_path: Path, side_effects: str = "external", **submit: Any) -> RouterConfig:
    task = TaskConfig(
        contract=str(contract(tmp_path, side_effects)), providers=["a", "b"], attempt_timeout=5.0
    )
    return RouterConfig(
        tasks={"post": task},
        certification=CertificationConfig(required=False),
        submit=SubmitConfig(**submit),
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
    )


async def refused(router: Router, input: Any, params: Any = None) -> JobRefused:
    with pytest.raises(JobRefused) as caught:
        await router.submit("shop", "k1", "post", input, params)
    assert await count_jobs(router.store) == 0  # nothing written
    return caught.value


@pytest.mark.parametrize(
    ("input", "params", "field", "says"),
    [
        ({"product": {}}, None, "input.product", "'name' is a required property"),
        ({}, None, "input", "'product' is a required property"),
        ({"product": {"name": 7}}, None, "input.product.name", "is not of type 'string'"),
        ("tea", None, "input", "must be a JSON object"),
        (GOOD, {"temperature": "hot"}, "params.temperature", "fixed by the contract"),
        (GOOD, {"temperature": 2.0}, "params.temperature", "fixed by the contract"),
        (GOOD, {"seed": 1}, "params.seed", "fixed by the contract"),
        (GOOD, {"response_format": {"type": "text"}}, "params.response_format", "fixed"),
        (GOOD, {"max_tokens": -5}, "params.max_tokens", "1 to 200"),
        (GOOD, {"max_tokens": 201}, "params.max_tokens", "1 to 200"),
        (GOOD, {"max_tokens": True}, "params.max_tokens", "1 to 200"),
        (GOOD, {"mock_response": "hi"}, "params.mock_response", "not an accepted parameter"),
        ({**GOOD, "x": float("nan")}, None, "input.x", "finite"),
        ({**GOOD, "x": {1, 2}}, None, "input.x", "set is not a JSON value"),
        # Python holds what JSON cannot (issue 33). Mutants, each seen failing here: the key
        # guard in door._check_shape removed ({1: "x"} was stored as {"1": "x"}); the surrogate
        # guard in door._check_scalar removed ("\ud800" raised UnicodeEncodeError: a 500).
        ({**GOOD, "x": {1: "one"}}, None, "input.x", "object keys must be strings"),
        (GOOD, {1: "one"}, "params", "object keys must be strings"),
        ({**GOOD, "tone": "\ud800"}, None, "input.tone", "valid Unicode"),
        ({**GOOD, "x": ["ok", "\udfff"]}, None, "input.x[1]", "valid Unicode"),
        # Fits the input_schema (tone is optional) but the prompt uses tone: the request cannot
        # be built. Mutant: door.admit's `except` around build_request re-raising (a RenderError
        # reached the caller, a 500 over HTTP), seen failing here.
        ({"product": {"name": "tea"}}, None, "input", "the provider request cannot be built"),
    ],
)
async def test_bad_work_is_refused_before_any_row(
    tmp_path: Path, input: Any, params: Any, field: str, says: str
) -> None:
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), config(tmp_path), providers={"a": a, "b": a}) as router:
        error = await refused(router, input, params)
    assert error.field == field
    assert says in str(error)
    # every refusal quotes what it refused, says what to do and names its kind (issue 33:
    # the door's mutmut survivors `value=None`, `hint=None`, `slug=None` in each check)
    assert isinstance(error.value, str) and error.value
    assert isinstance(error.hint, str) and error.hint
    assert error.slug in ("input-invalid", "params-invalid", "params-refused"), error.slug
    assert a.calls == []


@pytest.mark.parametrize(
    ("input", "field", "value"),
    [
        ({"product": {"name": 7}}, "input.product.name", "7"),
        ({**GOOD, "tags": ["a", 5]}, "input.tags.1", "5"),
        ({**GOOD, "tone": ["y" * 200]}, "input.tone", '["' + "y" * 75 + "..."),
        ({"tone": "warm"}, "input", '{"tone":"warm"}'),
        ({"product": {"name": {"k": "v"}}}, "input.product.name", '{"k":"v"}'),
    ],
)
async def test_an_input_refusal_quotes_the_value_it_refused_and_says_what_to_do(
    tmp_path: Path, input: Any, field: str, value: str
) -> None:
    """A refusal names the field, quotes the value there (as JSON, cut to 80 characters) and
    says what to do, whatever the depth (issue 33: survivors of the door's mutmut run, each
    seen failing here: `_at` starting from None or keeping "$" parts (the value `<missing>`),
    not stepping into a list; `_show` quoting None, never cutting, cutting elsewhere; the
    refusal without its value, hint or slug; the message split at its last ": " (a value whose
    own text holds one). Equivalent: `where in ("$", "")` with "" replaced, since
    validate_input names the root "$")."""
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), config(tmp_path), providers={"a": a, "b": a}) as router:
        error = await refused(router, input)
    assert (error.field, error.value) == (field, value)
    assert len(error.value) <= 80
    assert error.slug == "input-invalid"
    assert error.hint == "fix the input to fit the contract's input_schema"


async def test_a_max_tokens_refusal_says_the_range_quotes_the_value_and_the_fix(
    tmp_path: Path,
) -> None:
    """With a contract the range is 1 to its sampling.max_tokens; a task without a contract
    takes any whole number from 1 (no AttributeError on the missing contract). Survivors of
    the door's mutmut run, each seen failing here: the ceiling read whatever the contract
    (`or True`: a crash for the task without one), "at least 1" replaced, the refusal without
    its value, slug or hint, or with them changed."""
    bare = TaskConfig(providers=["a"], side_effects="none", certification="none")
    cfg = config(tmp_path)
    cfg = cfg.model_copy(update={"tasks": {**cfg.tasks, "bare": bare}})
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
        with pytest.raises(JobRefused) as capped:
            await router.submit("shop", "k1", "post", GOOD, {"max_tokens": 201})
        with pytest.raises(JobRefused) as bottom:
            await router.submit("shop", "k2", "bare", {"x": 1}, {"max_tokens": 0})
        job = await router.submit("shop", "k3", "bare", {"x": 1}, {"max_tokens": 5000})
        assert (await router.wait(job.id, SETTLE)).state is JobState.SUCCEEDED
    for error, value, reason in (
        (capped.value, "201", "must be a whole number from 1 to 200 (the contract's "),
        (bottom.value, "0", "must be a whole number from at least 1"),
    ):
        assert (error.field, error.value, error.slug) == (
            "params.max_tokens",
            value,
            "params-refused",
        )
        assert error.reason.startswith(reason), error.reason
        assert error.hint == "lower it or leave it out; more than the contract's is not certified"


async def test_nesting_and_size_limits_are_configurable(tmp_path: Path) -> None:
    deep: Any = "leaf"
    for _ in range(40):  # past the default of 32 levels
        deep = {"d": deep}
    cfg = config(tmp_path, max_input_depth=8, max_input_bytes=2048)
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
        too_deep = await refused(router, {**GOOD, "deep": deep})
        too_big = await refused(router, {**GOOD, "tone": "x" * 3000})
        fine = await router.submit("shop", "k2", "post", {**GOOD, "tone": "x" * 1000})
    assert too_deep.slug == "input-too-deep" and "8 levels" in str(too_deep)
    assert too_big.slug == "input-too-large" and "2048 bytes" in str(too_big)
    assert fine.created


async def test_a_hostile_depth_is_refused_without_recursion(tmp_path: Path) -> None:
    """100,000 levels: a recursive walk (or json.dumps) would raise RecursionError."""
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), config(tmp_path), providers={"a": a, "b": a}) as router:
        error = await refused(router, {**GOOD, "deep": deep})
    assert error.slug == "input-too-deep"
    # the value is named, never quoted (quoting it would walk it); mutant `value=None` killed
    assert error.value == "<nested deeper>"


async def test_max_tokens_below_the_contract_reaches_the_provider(tmp_path: Path) -> None:
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), config(tmp_path), providers={"a": a, "b": a}) as router:
        job = await router.submit("shop", "k1", "post", GOOD, {"max_tokens": 50})
        job = await router.wait(job.id, SETTLE)
    assert job.state is JobState.SUCCEEDED
    assert [(c.max_tokens, c.temperature) for c in a.calls] == [(50, 0.0)]


async def test_max_tokens_of_exactly_1_and_of_the_contracts_ceiling_are_admitted(
    tmp_path: Path,
) -> None:
    """Max tokens "from 1 to the contract's sampling.max_tokens" includes both ends (0 and
    201 are refused above). Mutants (issue 33, survivors of the door's mutmut run), each
    seen failing here: `value >= 1` as `value > 1`; `value <= ceiling` as `value < ceiling`."""
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), config(tmp_path), providers={"a": a, "b": a}) as router:
        for key, tokens in (("one", 1), ("ceiling", 200)):
            job = await router.submit("shop", key, "post", GOOD, {"max_tokens": tokens})
            assert (await router.wait(job.id, SETTLE)).state is JobState.SUCCEEDED
        with pytest.raises(JobRefused):
            await router.submit("shop", "zero", "post", GOOD, {"max_tokens": 0})
    assert [c.max_tokens for c in a.calls] == [1, 200]


async def test_a_stored_job_whose_request_cannot_be_built_fails_with_no_attempt(
    tmp_path: Path,
) -> None:
    """A job written before the door (or by an older version) whose prompt cannot render: the
    driver builds the request before any attempt row, and the job fails, nothing sent. The
    old code wrote the attempt, then failed to build outside its error handling: the attempt
    sat `started` until its lease ran out and the job ended `unknown`."""
    a, b = FakeProvider("a"), FakeProvider("b")
    cfg = config(tmp_path)
    async with Router.open(
        url(tmp_path), cfg, providers={"a": a, "b": b}, run_workers=False
    ) as router:
        job = await create_job(
            router.store,
            owner="shop",
            idempotency_key="old",
            task="post",
            input={"product": {"name": "t"}},
            params={},
            deadline_s=60,
            claimed_by=None,
            claim_s=1,
        )
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": b}) as router:
        done = await router.wait(job.id, SETTLE)
        attempts = await router.attempts(job.id)
    assert done.state is JobState.FAILED
    assert "could not be built, nothing was sent" in (done.error or "")
    assert "tone" in (done.error or "")
    assert attempts == [] and a.calls == [] and b.calls == []


async def test_closing_with_a_call_in_flight_says_it_may_have_acted(tmp_path: Path) -> None:
    """Shutdown text says what happened: the request was out, so unknown, and why."""
    a = FakeProvider("a", default=Step(hang=True))
    cfg = config(tmp_path)
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
        job = await router.submit("shop", "k1", "post", GOOD)
        await until(lambda: a.in_flight == 1, "the call to a", SETTLE, every=0.01)
    async with Router.open(
        url(tmp_path), cfg, providers={"a": a, "b": a}, run_workers=False
    ) as reader:
        [attempt] = await reader.attempts(job.id)
    assert attempt.state is AttemptState.UNKNOWN
    assert "in flight; the provider may have acted" in (attempt.error or "")


async def test_a_started_attempt_this_worker_never_called_is_called_not_left_to_expire(
    tmp_path: Path,
) -> None:
    """An attempt row this worker wrote whose call never began (its driver failed first, or
    the COMMIT acknowledgement was lost) is adopted and called by the next driver of the job.
    The old code left it `started` until its lease expired: `unknown`, provider never called."""
    from jobrouter.store.claims import AttemptStart

    a, b = FakeProvider("a"), FakeProvider("b")
    async with Router.open(url(tmp_path), config(tmp_path), providers={"a": a, "b": b}) as r:
        assert r.engine is not None
        me = r.engine.worker_id
        job, orphan = await r.store.jobs.create_and_start(
            owner="shop",
            idempotency_key="k1",
            task="post",
            input=GOOD,
            params={},
            deadline_s=60,
            claimed_by=me,
            claim_s=60,
            first=AttemptStart("a", None, me, 600.0),
        )
        assert orphan is not None
        r.engine.hand_over(job)  # as a poll (or a replayed submit) hands it to a driver
        done = await r.wait(job.id, SETTLE)
        attempts = await r.attempts(job.id)
    assert done.state is JobState.SUCCEEDED
    assert [(x.id, x.state) for x in attempts] == [(orphan.id, AttemptState.SUCCEEDED)]
    assert len(a.calls) == 1 and b.calls == []


def _nested(levels: int) -> Any:
    """A value of exactly `levels` containers, one inside the other."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"d": value}
    return value


async def test_input_nested_exactly_max_input_depth_is_admitted_one_more_is_not(
    tmp_path: Path,
) -> None:
    """ "At most `max_input_depth` levels" (docs/failures.md): the input object is level 1, so
    the input {"deep": <7 containers>} nests 8 and is admitted at max_input_depth = 8; one
    level more is refused. Mutant (issue 33): door._check_shape `depth > limits.max_depth`
    as `depth >= limits.max_depth` refuses the input at exactly the limit."""
    cfg = config(tmp_path, max_input_depth=8)
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
        at_limit = await router.submit("shop", "k1", "post", {**GOOD, "deep": _nested(7)})
        params_at_limit = await router.submit("shop", "k2", "post", GOOD, {})
        assert at_limit.created and params_at_limit.created
        with pytest.raises(JobRefused) as caught:
            await router.submit("shop", "k3", "post", {**GOOD, "deep": _nested(8)})
    assert caught.value.slug == "input-too-deep"
    assert caught.value.field.startswith("input.deep")


async def test_input_of_exactly_max_input_bytes_is_admitted_one_byte_more_is_not(
    tmp_path: Path,
) -> None:
    """ "At most `max_input_bytes`" of canonical JSON of input + params: exactly the limit is
    admitted, one byte more refused. Mutant (issue 33): door._check_size `size >
    limits.max_bytes` as `size >= limits.max_bytes`."""
    from jobrouter.models import canonical_json

    limit = 2048

    def padded(extra: int) -> dict[str, Any]:
        base = {**GOOD, "pad": ""}
        size = len(canonical_json({"input": base, "params": {}}).encode("utf-8"))
        return {**GOOD, "pad": "x" * (limit - size + extra)}

    exact = padded(0)
    assert len(canonical_json({"input": exact, "params": {}}).encode("utf-8")) == limit
    cfg = config(tmp_path, max_input_bytes=limit)
    a = FakeProvider("a")
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
        assert (await router.submit("shop", "k1", "post", exact)).created
        with pytest.raises(JobRefused) as caught:
            await router.submit("shop", "k2", "post", padded(1))
    assert caught.value.slug == "input-too-large"
    assert f"{limit + 1} bytes" in caught.value.value
