"""`jobrouter.step`: the one "read eligibility, decide" function behind both the first attempt of
a job about to be created and every turn of its driver's loop. The health port here is a plain
object of three functions (the port is data); the store is not involved."""

from __future__ import annotations

import time

from jobrouter.health import ProviderHealth
from jobrouter.models import Attempt
from jobrouter.policy import Eligibility, Finish, Start, TaskPolicy, Wait
from jobrouter.providers import ProviderError
from jobrouter.step import Step, decide_step, next_step
from jobrouter.tasks import TaskRuntime
from jobrouter.timing import Deadline

TASK = TaskRuntime(
    name="t",
    policy=TaskPolicy(providers=("a", "b"), exclusive=False),
    deadline_s=None,
    attempt_timeout_s=None,
)


def port(verdicts: dict[str, Eligibility], reads: list[str]) -> ProviderHealth:
    async def eligibility(task: TaskRuntime) -> dict[str, Eligibility]:
        reads.append(task.name)
        return dict(verdicts)

    async def acquire(provider: str) -> bool:
        raise AssertionError("deciding never claims a probe")

    async def record(provider: str, error: ProviderError | None) -> None:
        raise AssertionError("deciding records nothing")

    return ProviderHealth(eligibility, acquire, record)


async def test_next_step_reads_the_eligibility_once_and_asks_the_policy() -> None:
    reads: list[str] = []
    verdicts = {"a": Eligibility(False, "circuit open", retry_at=None), "b": Eligibility(True)}
    step = await next_step(port(verdicts, reads), TASK, [], Deadline(None))
    assert reads == ["t"]
    assert step.decision == Start("b")
    assert step.start_at_once() == "b"
    assert [(n.kind, n.data) for n in step.refusals()] == [
        ("provider.skipped", {"provider": "a", "reason": "circuit open"})
    ]


def test_a_half_open_probe_is_not_started_at_once() -> None:
    verdicts = {"a": Eligibility(True, "circuit half-open: this attempt is the probe")}
    step = decide_step(TASK, [], verdicts, Deadline(None))
    assert step.decision == Start("a")
    assert step.start_at_once() is None  # the driver claims the probe in its own transaction


def test_only_a_start_starts_at_once() -> None:
    waiting = Step(Wait(None, "later"), {"a": Eligibility(True)})
    finished = decide_step(
        TASK, list[Attempt](), {"a": Eligibility(True)}, Deadline(time.time() - 1)
    )
    assert isinstance(finished.decision, Finish)  # the deadline passed: nothing starts
    assert waiting.start_at_once() is None and finished.start_at_once() is None
