"""What `Router` answers the edges (jobrouter.reads, jobrouter.operations): the rules the
HTTP routes and the console kept for themselves before, now decided once behind the door."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.config import RouterConfig, TaskConfig
from jobrouter.errors import AttemptNotFound, JobNotFound
from jobrouter.listing import JobFilter
from jobrouter.states import JobState
from tests.support.fakes import FakeProvider, Step
from tests.support.outbox_jobs import job_in


def open_router(tmp_path: Path) -> Any:
    task = TaskConfig(providers=["a"], side_effects="none", certification="none")
    hang = FakeProvider("a", default=Step(hang=True))
    return Router.open(
        f"sqlite:///{tmp_path / 'r.db'}",
        RouterConfig(tasks={"caption": task}),
        providers={"a": hang},
    )


async def test_a_job_is_visible_to_its_owner_and_operators_only(tmp_path: Path) -> None:
    """Another owner's job is JobNotFound, never forbidden (ids cannot be probed).
    Mutant: visible_job without its owner comparison, seen failing."""
    async with open_router(tmp_path) as router:
        job = await router.submit("shop-1", "k1", "caption", {"x": 1})
        assert (await router.visible_job(job.id, to="shop-1")).id == job.id
        assert (await router.visible_job(job.id, to=None)).id == job.id  # an operator
        with pytest.raises(JobNotFound):
            await router.visible_job(job.id, to="shop-2")
        with pytest.raises(JobNotFound):
            await router.visible_job("no-such-job", to=None)


async def test_an_attempt_is_read_or_attempt_not_found(tmp_path: Path) -> None:
    """Mutant: Router.attempt returning None for a miss, seen failing."""
    async with open_router(tmp_path) as router:
        with pytest.raises(AttemptNotFound):
            await router.attempt("no-such-attempt")


async def test_listing_and_counts_answer_through_the_router(tmp_path: Path) -> None:
    async with open_router(tmp_path) as router:
        job = await router.submit("shop-1", "k1", "caption", {"x": 1})
        page = await router.list_jobs(JobFilter(owner="shop-1"), limit=10)
        assert [listed.id for listed in page.items] == [job.id]
        counts = await router.count_jobs_by_state(JobFilter(owner="shop-2"))
        assert set(counts) == set(JobState) and sum(counts.values()) == 0
        assert router.task_names() == ["caption"]


async def test_replay_dead_with_nothing_dead_moves_none(tmp_path: Path) -> None:
    """Naming an event that is not dead moves none, naming none moves none; the replay of
    real dead letters, one and all, is the console's test (tests/ui/test_console_operator.py)."""
    async with open_router(tmp_path) as router:
        assert await router.replay_dead("no-such-event") == 0
        assert await router.replay_dead() == 0
        assert router.worker_id is not None  # this router runs workers


async def test_replay_dead_moves_the_one_named_or_every_one(tmp_path: Path) -> None:
    """Mutants: replay_dead(None) replaying nothing; replay_dead(id) replaying every one;
    each seen failing."""
    async with open_router(tmp_path) as router:
        store = router.store  # a test may: it plants the dead letters the router replays
        for n in range(3):
            await job_in(store, JobState.SUCCEEDED, key=f"k{n}")
        claimed = await store.outbox.claim_outbox(["shop"], "w1", claim_s=30, limit=10)
        for event in claimed:
            assert await store.outbox.outbox_bury(event.id, "w1", error="HTTP 500: no")
        assert await router.replay_dead(claimed[0].id) == 1
        assert (await router.outbox_counts()).dead == {"shop": 2}
        assert await router.replay_dead() == 2
        assert await router.dead_letters() == []
