"""One error model at the edge (issue 26): every error a caller can get from `Router` is a
`JobRouterError` carrying its HTTP status and problem slug as data, and HTTP maps by that data.

The expected statuses and slugs below are the ones the HTTP API answered before the mapping
became a table (router/http/problems.py's isinstance ladder): a change here is a change of the
API, not of its wording.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import jobrouter
from jobrouter import Router
from jobrouter.config import RouterConfig, TaskConfig
from jobrouter.errors import (
    AttemptNotFound,
    BudgetCrossed,
    BudgetExhausted,
    BudgetUnheld,
    ConfigError,
    IdempotencyConflict,
    InvalidIdempotencyKey,
    InvalidIdentity,
    InvalidText,
    InvalidTransition,
    JobNotFound,
    JobRefused,
    JobRouterError,
    LeaseLost,
    ListingError,
    NoEligibleProvider,
    ReinstateRefused,
    ResolutionInvalid,
    RouterClosed,
    SpendQueryInvalid,
    StoreError,
    UnknownTask,
    WaitTimeout,
)
from jobrouter.http.problems import domain_problem
from tests.support.fakes import FakeProvider, Step

# One instance of every class, with the status and slug HTTP answers it with.
SAMPLES: list[tuple[JobRouterError, int, str]] = [
    (ConfigError("broken"), 500, "internal"),
    (UnknownTask("summary", ["caption"]), 422, "unknown-task"),
    (
        IdempotencyConflict(owner="o", idempotency_key="k", job_id="j"),
        422,
        "idempotency-key-reused",
    ),
    (JobRefused(field="input.x", value="1", reason="r", hint="h"), 422, "job-refused"),
    (
        JobRefused(field="input", value="1", reason="r", hint="h", slug="input-invalid"),
        422,
        "input-invalid",
    ),
    (
        BudgetExhausted(budget="b", side="usd", limit=1.0, spent=1.0, retry_after=9.5),
        429,
        "budget-exhausted",
    ),
    (BudgetCrossed(budget="b", side="usd", limit=1.0, charged=1.0), 500, "internal"),
    (BudgetUnheld(budget="b", reason="r", hint="h"), 500, "internal"),
    (JobNotFound("j"), 404, "job-not-found"),
    (AttemptNotFound("a"), 404, "attempt-not-found"),
    (
        InvalidTransition(entity="job", entity_id="j", src="succeeded", dst="cancelled"),
        409,
        "invalid-transition",
    ),
    (ResolutionInvalid(attempt_id="a", field="result", reason="r"), 422, "resolution-invalid"),
    (NoEligibleProvider(task="t", reasons={"a": "uncertified"}), 500, "internal"),
    (InvalidText("reason", "holds a NUL"), 422, "text-invalid"),
    (InvalidIdentity("owner", "must be a non-empty string"), 422, "text-invalid"),
    (InvalidIdempotencyKey("must be 1 to 255 characters, got 256"), 400, "idempotency-key-invalid"),
    (StoreError("down"), 503, "unavailable"),
    (StoreError("damaged", transient=False), 503, "store-broken"),
    (ListingError("bad cursor"), 422, "listing-invalid"),
    (SpendQueryInvalid(field="by", value="x", reason="r", hint="h"), 422, "spend-query-invalid"),
    (LeaseLost("w", 3), 500, "internal"),
    (ReinstateRefused(field="provider", reason="r"), 422, "reinstate-refused"),
    (WaitTimeout(job_id="j", state="running", timeout=1.0), 504, "wait-timeout"),
    (RouterClosed(), 503, "unavailable"),
]
SLUG = re.compile(r"[a-z]+(-[a-z]+)*")


def subclasses(cls: type[JobRouterError]) -> set[type[JobRouterError]]:
    found = set(cls.__subclasses__())
    return found.union(*(subclasses(sub) for sub in found))


def every_module() -> None:
    """Import every module of the package, so a subclass defined anywhere is walked."""
    for module in pkgutil.walk_packages(jobrouter.__path__, "jobrouter."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def test_every_error_class_has_a_sample_here() -> None:
    """A new error must say what HTTP answers it with: add it to SAMPLES. Every module is
    imported first, so an error defined outside errors.py (as `ReinstateRefused` was, in
    watch.py) is found too."""
    every_module()
    assert subclasses(JobRouterError) <= {type(exc) for exc, _, _ in SAMPLES}


@pytest.mark.parametrize(("exc", "status", "slug"), SAMPLES, ids=lambda v: type(v).__name__)
def test_each_error_carries_the_status_and_slug_http_answered(
    exc: JobRouterError, status: int, slug: str
) -> None:
    """Mutants: any class's `status` or `slug` changed; StoreError's broken slug dropped."""
    assert (exc.status, exc.slug) == (status, slug)
    assert 400 <= exc.status <= 599 and SLUG.fullmatch(exc.slug)
    answer = domain_problem(exc)
    assert (answer.status, answer.slug) == (status, slug)
    assert answer.detail
    assert set(answer.members) == set(exc.members)


@pytest.mark.parametrize(("exc", "status", "slug"), SAMPLES, ids=lambda v: type(v).__name__)
def test_http_maps_by_the_data_not_by_the_type(exc: JobRouterError, status: int, slug: str) -> None:
    """Change an error's data and its answer follows: nothing in HTTP asks its type.
    Mutant: domain_problem reading a status from a type table instead of `exc.status`."""
    exc.status, exc.slug = 418, "probe"
    answer = domain_problem(exc)
    assert (answer.status, answer.slug, answer.detail) == (418, "probe", str(exc))


def test_answers_keep_their_members_and_retry_after() -> None:
    """What a client acts on without reading the text, as before the table.
    Mutants: a member dropped from a class's `members`; a `_RETRY_AFTER` entry removed."""
    conflict = domain_problem(IdempotencyConflict(owner="o", idempotency_key="k", job_id="j"))
    assert conflict.members == {"job_id": "j", "idempotency_key": "k"}
    budget = domain_problem(
        BudgetExhausted(budget="b", side="usd", limit=1.0, spent=0.5, retry_after=9.2)
    )
    assert budget.headers == {"Retry-After": "10"}
    assert budget.members == {"budget": "b", "side": "usd", "limit": 1.0, "spent": 0.5}
    assert domain_problem(RouterClosed()).headers == {"Retry-After": "1"}
    assert domain_problem(StoreError("x", transient=False)).headers == {}
    moved = domain_problem(
        InvalidTransition(entity="job", entity_id="j", src="succeeded", dst="cancelled")
    )
    assert moved.members == {"current_state": "succeeded"}
    spend = domain_problem(SpendQueryInvalid(field="by", value="x", reason="r", hint="h"))
    assert spend.members == {"field": "by", "errors": [{"where": "query.by", "problem": "r"}]}
    unknown = domain_problem(UnknownTask("summary", ["caption", "post"]))
    assert unknown.detail == "no task 'summary'; configured tasks: caption, post"


def test_a_wait_timeout_is_still_a_timeout_error() -> None:
    """Callers that caught the builtin TimeoutError before keep working.
    Mutant: WaitTimeout without its TimeoutError base."""
    assert issubclass(WaitTimeout, TimeoutError)


# ---- nothing builtin escapes the Router for a caller's mistake ---------------------------------

BUILTINS = (ValueError, RuntimeError, TimeoutError, KeyError, TypeError)


def config() -> RouterConfig:
    task = TaskConfig(providers=["a"], side_effects="none", certification="none")
    return RouterConfig(tasks={"caption": task})


def open_router(tmp_path: Path) -> object:
    hang = FakeProvider("a", default=Step(hang=True))
    return Router.open(f"sqlite:///{tmp_path / 'r.db'}", config(), providers={"a": hang})


def only_ours(exc: BaseException) -> bool:
    """A JobRouterError, and a builtin only where it is one on purpose (WaitTimeout)."""
    return isinstance(exc, JobRouterError) and (
        isinstance(exc, WaitTimeout) or not isinstance(exc, BUILTINS)
    )


@pytest.mark.parametrize(
    ("owner", "key", "error"),
    [
        ("", "k1", InvalidIdentity),
        ("   ", "k1", InvalidIdentity),
        ("sh\x00p", "k1", InvalidIdentity),
        ("shop", "", InvalidIdempotencyKey),
        ("shop", "k" * 256, InvalidIdempotencyKey),
        ("shop", "k\x00", InvalidIdempotencyKey),
    ],
)
async def test_a_bad_owner_or_key_is_a_domain_error(
    tmp_path: Path, owner: str, key: str, error: type[JobRouterError]
) -> None:
    """Mutants: check_identity raising ValueError again; its NUL checks removed (the store's
    InvalidText would come later, after the door, and not as the key's own error)."""
    async with open_router(tmp_path) as router:  # type: ignore[attr-defined]
        with pytest.raises(JobRouterError) as refused:
            await router.submit(owner, key, "caption", {"x": 1})
        assert type(refused.value) is error and only_ours(refused.value)
        with pytest.raises(error):
            router.check_submit(owner, key, "caption")


async def test_an_unknown_task_is_unknown_task_naming_the_configured_ones(tmp_path: Path) -> None:
    """`Router.task`, `Router.check_submit` (which HTTP calls before `submit`) and `submit`
    (which calls it) raise UnknownTask, a ConfigError as before. Mutants: Router.task returning
    None for a miss; submit raising a plain ConfigError of its own (seen failing)."""
    async with open_router(tmp_path) as router:  # type: ignore[attr-defined]
        with pytest.raises(UnknownTask, match="configured tasks: caption") as unknown:
            router.check_submit("shop", "k1", "summary")
        assert isinstance(unknown.value, ConfigError) and only_ours(unknown.value)
        with pytest.raises(UnknownTask):
            router.task("summary")
        assert router.task("caption").name == "caption"
        with pytest.raises(UnknownTask):  # submit's check is check_submit's, the one rule
            await router.submit("shop", "k1", "summary", {"x": 1})


async def test_a_wait_that_times_out_is_wait_timeout(tmp_path: Path) -> None:
    """Mutant: Router.wait raising the builtin TimeoutError again."""
    async with open_router(tmp_path) as router:  # type: ignore[attr-defined]
        job = await router.submit("shop", "k1", "caption", {"x": 1})
        with pytest.raises(WaitTimeout, match=job.id) as timed_out:
            await router.wait(job.id, timeout=0.05)
        assert timed_out.value.job_id == job.id and timed_out.value.state == "running"


async def test_a_closed_router_says_so(tmp_path: Path) -> None:
    """Every call after close() is RouterClosed, never a store's or the loop's builtin.
    Mutant: Router.wait without its `_check_open` (it sat out its timeout: a WaitTimeout
    after 1 s, or no end at all without one)."""
    router = await open_router(tmp_path)  # type: ignore[misc]
    job = await router.submit("shop", "k1", "caption", {"x": 1})
    await router.close()
    calls = [
        router.submit("shop", "k2", "caption", {"x": 1}),
        router.get(job.id),
        router.wait(job.id, timeout=1.0),
        router.cancel(job.id),
        router.attempts(job.id),
    ]
    for call in calls:
        with pytest.raises(RouterClosed):
            await call
    with pytest.raises(RouterClosed):
        router.check_submit("shop", "k3", "caption")


# ---- HTTP calls the domain's checks, and answers them as before --------------------------------


async def test_http_answers_the_domains_key_and_task_checks(tmp_path: Path) -> None:
    """The 255-character and unknown-task rules live in the domain only; HTTP answers them
    with the 400 and 422 it gave when it checked them itself, the key before the task.
    Mutant: jobs.submit_job without its `router.check_submit` call (a long key reaches
    submit, which answers it; an unknown task reaches submit's own ConfigError: a 500);
    check_identity's length bound moved by one. Both seen failing."""
    import httpx

    from jobrouter.http.app import create_app

    async with open_router(tmp_path) as router:  # type: ignore[attr-defined]
        token, _ = await router.store.tokens.create_token("shop-1")
        transport = httpx.ASGITransport(app=create_app(router))
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://jobrouter") as client:

            async def submit(key: str, task: str) -> httpx.Response:
                body = {"task": task, "input": {"x": 1}}
                return await client.post(
                    "/v1/jobs", json=body, headers={**auth, "Idempotency-Key": key}
                )

            long_key = await submit("k" * 256, "summary")
            unknown = await submit("k1", "summary")
            at_limit = await submit("k" * 255, "caption")
    assert long_key.status_code == 400
    assert long_key.json()["type"] == "urn:jobrouter:problem:idempotency-key-invalid"
    assert "255" in long_key.json()["detail"]
    assert unknown.status_code == 422
    assert unknown.json()["type"] == "urn:jobrouter:problem:unknown-task"
    assert unknown.json()["detail"] == "no task 'summary'; configured tasks: caption"
    assert at_limit.status_code == 202
