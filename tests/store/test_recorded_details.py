"""What the store records besides the state: who ended an attempt and why, the data of the
events an operator reads, the fields of a refusal. Written after mutation testing
(docs/testing.md): each test kills mutants that survived the rest of the suite, named in its
docstring (e.g. `cancel_job` recording no reason). On both backends."""

from __future__ import annotations

import pytest

from jobrouter.errors import AttemptNotFound, InvalidTransition, JobNotFound
from jobrouter.models import AttemptUsage, NewEvent
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore
from tests.store.test_store import attempt_of, start, submit

NO_USAGE = AttemptUsage()


async def test_a_cancel_records_why_on_every_open_attempt_and_in_the_log(store: SqlStore) -> None:
    """Kills cancel_job mutants that drop or change the attempt's error_kind / error /
    finished_at or the data of `attempt.cancelled` and `job.cancelled`."""
    job = await submit(store)
    attempt = await start(store, job, "a")
    await store.jobs.cancel_job(job.id, "the customer withdrew the order")
    cancelled = await attempt_of(store, attempt.id)
    assert cancelled.state is AttemptState.CANCELLED
    why = "the customer withdrew the order"
    assert (cancelled.error_kind, cancelled.error) == ("cancelled", why)
    assert cancelled.finished_at is not None and cancelled.finished_at >= cancelled.started_at
    events = {event.kind: event.data for event in await store.jobs.list_events(job.id)}
    assert events["attempt.cancelled"] == {
        "attempt_id": attempt.id,
        "error": "the customer withdrew the order",
    }
    assert events["job.cancelled"] == {"reason": "the customer withdrew the order"}


async def test_a_cancel_after_an_unknown_attempt_still_cancels_the_later_ones(
    store: SqlStore,
) -> None:
    """The unknown attempt is skipped, not the ones after it: an attempt started after it is
    cancelled. Kills mutant `cancel_job` 21 (`continue` -> `break`)."""
    job = await submit(store)
    unknown = await start(store, job, "a")
    await store.jobs.finish_attempt(
        unknown.id, AttemptState.UNKNOWN, error_kind="unknown", error="read timeout", usage=NO_USAGE
    )
    later = await start(store, job, "b")
    await store.jobs.cancel_job(job.id, "withdrawn")
    assert (await attempt_of(store, unknown.id)).state is AttemptState.UNKNOWN
    assert (await attempt_of(store, later.id)).state is AttemptState.CANCELLED
    events = {event.kind: event.data for event in await store.jobs.list_events(job.id)}
    assert events["attempt.cancelled"] == {"attempt_id": later.id, "error": "withdrawn"}
    assert events["job.cancelled"] == {"reason": "withdrawn", "unknown_attempts": [unknown.id]}


async def test_a_settlement_logs_its_error_and_no_error_when_there_is_none(store: SqlStore) -> None:
    """Kills settle_job mutants that always or never put `error` into the event's data."""
    failed = await submit(store, key="failed")
    await store.jobs.settle_job(failed.id, JobState.FAILED, error="a: HTTP 500; b: HTTP 503")
    attention = await submit(store, key="attention")
    await start(store, attention, "a")  # running: may go to unknown
    await store.jobs.settle_job(attention.id, JobState.UNKNOWN, error=None)
    [failed_event] = [e for e in await store.jobs.list_events(failed.id) if e.kind == "job.failed"]
    assert failed_event.data == {"error": "a: HTTP 500; b: HTTP 503"}
    [unknown_event] = [
        e for e in await store.jobs.list_events(attention.id) if e.kind == "job.unknown"
    ]
    assert unknown_event.data == {}


async def test_an_ended_attempt_records_when_why_and_the_answer_kept(store: SqlStore) -> None:
    """An attempt that ends without a result keeps its end time, the unusable answer (for the
    operator who resolves it) and logs who ended and why. Kills mutants `finish_attempt` 24
    (no finished_at), 27 and 35 (the answer dropped), 37-44 and 58 (the event's data)."""
    job = await submit(store)
    attempt = await start(store, job, "a", exclusive=True)
    done = await store.jobs.finish_attempt(
        attempt.id,
        AttemptState.UNKNOWN,
        error_kind="rejected",
        error="answer is not JSON",
        usage=NO_USAGE,
        output={"text": "{garbled"},
    )
    stored = await attempt_of(store, attempt.id)
    assert stored == done
    assert stored.finished_at is not None and stored.finished_at >= attempt.started_at
    assert stored.output == {"text": "{garbled"}
    [event] = [e for e in await store.jobs.list_events(job.id) if e.kind == "attempt.unknown"]
    assert event.data == {
        "attempt_id": attempt.id,
        "provider": "a",
        "error_kind": "rejected",
        "error": "answer is not JSON",
    }


async def test_a_refused_end_names_the_state_asked_for(store: SqlStore) -> None:
    """`only_from` refuses an attempt in another state, naming both states; a success is
    refused outright. Kills mutants `finish_attempt` 3 (the refusal's text), 13 and
    `finish_attempt_cas` 9 (`dst` None)."""
    job = await submit(store)
    attempt = await start(store, job, "a")
    with pytest.raises(InvalidTransition) as refused:
        await store.jobs.finish_attempt(
            attempt.id,
            AttemptState.FAILED,
            error_kind="resolved",
            error="note",
            usage=NO_USAGE,
            only_from=AttemptState.UNKNOWN,
        )
    assert (refused.value.src, refused.value.dst) == (AttemptState.STARTED, AttemptState.FAILED)
    assert str(refused.value) == (
        f"attempt {attempt.id} cannot go from started to failed: "
        "only an attempt in state unknown may"
    )
    with pytest.raises(ValueError) as success:
        await store.jobs.finish_attempt(
            attempt.id, AttemptState.SUCCEEDED, error_kind=None, error=None, usage=NO_USAGE
        )
    assert str(success.value) == "a success goes through finish_attempt_cas"
    with pytest.raises(InvalidTransition) as refused_win:
        await store.jobs.finish_attempt_cas(
            attempt.id, {"text": "ok"}, NO_USAGE, only_from=AttemptState.UNKNOWN
        )
    assert (refused_win.value.src, refused_win.value.dst) == (
        AttemptState.STARTED,
        AttemptState.SUCCEEDED,
    )


async def test_an_unknown_attempt_asked_back_to_started_is_refused_naming_it(
    store: SqlStore,
) -> None:
    """The transition table (router/states.py) has no way back from `unknown` to `started`:
    `end_attempt` refuses it under the job's lock, naming the attempt and both states, and the
    attempt stays as it was. Kills mutants `transitions.end_attempt` 6-13 (the refusal's
    entity, id, source or target dropped or None)."""
    job = await submit(store)
    attempt = await start(store, job, "a")
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="read timeout", usage=NO_USAGE
    )
    with pytest.raises(InvalidTransition) as refused:
        await store.jobs.finish_attempt(
            attempt.id, AttemptState.STARTED, error_kind=None, error=None, usage=NO_USAGE
        )
    assert (
        refused.value.entity,
        refused.value.entity_id,
        refused.value.src,
        refused.value.dst,
    ) == ("attempt", attempt.id, AttemptState.UNKNOWN, AttemptState.STARTED)
    assert str(refused.value) == f"attempt {attempt.id} cannot go from unknown to started"
    assert (await attempt_of(store, attempt.id)).state is AttemptState.UNKNOWN


async def test_a_finished_job_refuses_a_new_attempt_saying_so(store: SqlStore) -> None:
    """Kills mutant `_start_in` 2 (the refusal names no entity)."""
    job = await submit(store)
    cancelled = await store.jobs.cancel_job(job.id, "withdrawn")
    with pytest.raises(InvalidTransition) as refused:
        await start(store, cancelled, "a")
    assert (refused.value.entity, refused.value.src, refused.value.dst) == (
        "job",
        JobState.CANCELLED,
        "new attempt",
    )
    assert str(refused.value) == (
        f"job {job.id} cannot go from cancelled to new attempt: "
        "only a queued or running job starts attempts"
    )


async def test_a_refused_job_move_names_the_job_and_both_states(store: SqlStore) -> None:
    """Kills mutants `_move_job` 6-12 (the refusal's entity, id or states dropped)."""
    job = await submit(store)
    attempt = await start(store, job, "a")
    await store.jobs.finish_attempt_cas(attempt.id, {"text": "ok"}, NO_USAGE)
    with pytest.raises(InvalidTransition) as refused:
        await store.jobs.settle_job(job.id, JobState.FAILED, error="too late")
    assert (
        refused.value.entity,
        refused.value.entity_id,
        refused.value.src,
        refused.value.dst,
    ) == ("job", job.id, JobState.SUCCEEDED, JobState.FAILED)
    assert str(refused.value) == f"job {job.id} cannot go from succeeded to failed"


async def test_an_unknown_id_is_named_in_the_refusal(store: SqlStore) -> None:
    """Kills mutants `router.store.transitions.x_lock_attempt` 11 (the attempt's id not
    named; found on main's layout, after the store's split); the job's twin is checked too."""
    with pytest.raises(AttemptNotFound) as no_attempt:
        await store.jobs.finish_attempt(
            "att-missing", AttemptState.FAILED, error_kind="rejected", error="x", usage=NO_USAGE
        )
    assert no_attempt.value.attempt_id == "att-missing"
    assert str(no_attempt.value) == "no attempt att-missing"
    with pytest.raises(JobNotFound) as no_job:
        await store.jobs.cancel_job("job-missing", "withdrawn")
    assert (no_job.value.job_id, str(no_job.value)) == ("job-missing", "no job job-missing")


async def test_a_resolution_keeps_the_operators_note(store: SqlStore) -> None:
    """Kills the resolve_attempt mutant that drops the note."""
    job = await submit(store)
    attempt = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="read timeout", usage=NO_USAGE
    )
    _, resolved = await store.jobs.resolve_attempt(
        attempt.id, AttemptState.FAILED, None, "checked the shop: nothing was posted"
    )
    assert (resolved.error_kind, resolved.error) == (
        "resolved",
        "checked the shop: nothing was posted",
    )


async def test_an_expired_lease_says_which_worker_stopped(store: SqlStore) -> None:
    """Kills the expire_attempts mutant that records no error."""
    job = await submit(store)
    await start(store, job, "a", lease_s=-1.0)  # already expired
    [expired] = await store.jobs.expire_attempts()
    assert expired.error is not None
    assert expired.error.startswith("lease expired: worker w1 did not record an outcome")


async def test_an_exclusive_refusal_names_the_job_and_the_open_attempt(store: SqlStore) -> None:
    """Kills _refuse_if_open mutants that drop the refusal's entity, id, target or reason."""
    job = await submit(store)
    first = await start(store, job, "a", exclusive=True)
    with pytest.raises(InvalidTransition) as caught:
        await start(store, job, "b", exclusive=True)
    refusal = caught.value
    assert (refusal.entity, refusal.entity_id, refusal.dst) == ("job", job.id, "new attempt")
    assert refusal.src == f"attempt {first.id} started"
    assert str(refusal).endswith(": an exclusive task waits until that attempt is resolved")


@pytest.mark.parametrize("change", ["note", "cancel", "win"])
async def test_a_note_a_cancel_or_a_win_wakes_the_jobs_watchers(
    store: SqlStore, change: str
) -> None:
    """Someone watching the job (`Router.watch`, the HTTP event stream) is woken by the change,
    not left to its next poll. Kills the `_notify(None)` mutants of note, cancel_job and
    finish_attempt_cas."""
    job = await submit(store)
    attempt = await start(store, job, "a")
    with store.jobs.watching(job.id) as changed:
        if change == "note":
            await store.jobs.note(job.id, [NewEvent(kind="job.waiting", data={})])
        elif change == "cancel":
            await store.jobs.cancel_job(job.id, "withdrawn")
        else:
            await store.jobs.finish_attempt_cas(attempt.id, {"text": "ok"}, NO_USAGE)
        assert changed.event.is_set()


@pytest.mark.parametrize("change", ["note", "cancel", "reopen", "win", "settle", "end", "start"])
async def test_a_change_of_one_job_wakes_no_other_jobs_watchers(
    store: SqlStore, change: str
) -> None:
    """Only the changed job's watchers are woken: `_notify(None)` means "changes may have been
    missed" and sends every watcher of every job to read its job again. Kills mutants
    `cancel_job` 89, `resolve_attempt`'s notify, `settle_job` 44, `finish_attempt` 59 and
    `start_attempt` 30 (`self._notify(None...)`)."""
    job = await submit(store)
    other = await submit(store, key="other")
    attempt = await start(store, job, "a", exclusive=True)
    if change == "reopen":
        await store.jobs.finish_attempt(
            attempt.id,
            AttemptState.UNKNOWN,
            error_kind="unknown",
            error="read timeout",
            usage=NO_USAGE,
        )
        await store.jobs.settle_job(job.id, JobState.UNKNOWN, error="needs attention")
    with store.jobs.watching(job.id) as changed, store.jobs.watching(other.id) as unrelated:
        if change == "note":
            await store.jobs.note(job.id, [NewEvent(kind="job.waiting", data={})])
        elif change == "cancel":
            await store.jobs.cancel_job(job.id, "withdrawn")
        elif change == "reopen":
            await store.jobs.resolve_attempt(attempt.id, AttemptState.FAILED, None, "checked")
        elif change == "settle":
            await store.jobs.settle_job(job.id, JobState.FAILED, error="a: HTTP 500")
        elif change == "start":
            await start(store, job, "b")
        elif change == "end":
            await store.jobs.finish_attempt(
                attempt.id,
                AttemptState.FAILED,
                error_kind="rejected",
                error="HTTP 500",
                usage=NO_USAGE,
            )
        else:
            await store.jobs.finish_attempt_cas(attempt.id, {"text": "ok"}, NO_USAGE)
        assert changed.event.is_set()
        assert not unrelated.event.is_set()


async def test_a_settlement_hands_the_settled_job_to_its_watchers(store: SqlStore) -> None:
    """The watcher gets the job as committed, with no read of its own. Kills mutant
    `settle_job` 45 (`self._notify(job_id, None)`: the watcher must read the job again)."""
    job = await submit(store)
    await start(store, job, "a")
    with store.jobs.watching(job.id) as changed:
        settled = await store.jobs.settle_job(job.id, JobState.UNKNOWN, error="needs attention")
        assert changed.event.is_set()
        assert changed.take() == settled


async def test_a_win_hands_the_finished_job_to_its_watchers(store: SqlStore) -> None:
    """The watcher of a job that just succeeded gets it as committed, without a read of its
    own. Kills mutants `finish_attempt_cas` 144, 146 and 147 (no job handed on a win)."""
    job = await submit(store)
    attempt = await start(store, job, "a")
    with store.jobs.watching(job.id) as changed:
        outcome = await store.jobs.finish_attempt_cas(attempt.id, {"text": "ok"}, NO_USAGE)
        assert outcome.won and changed.event.is_set()
        assert changed.take() == outcome.job


async def test_an_attempt_records_its_model_and_the_notes_of_its_start(store: SqlStore) -> None:
    """The model, and the notes logged with the start (e.g. a provider skipped), are kept; the
    watcher gets the job as started. Kills mutants `start_attempt` 4 (the model not recorded),
    12 (the notes dropped) and 31 (no job handed to the watchers)."""
    job = await submit(store)
    skipped = NewEvent(kind="provider.skipped", data={"provider": "b", "why": "circuit open"})
    with store.jobs.watching(job.id) as changed:
        running, attempt = await store.jobs.start_attempt(
            job.id,
            provider="a",
            model="llama-3-8b",
            worker="w1",
            lease_s=30.0,
            exclusive=False,
            notes=[skipped],
        )
        assert changed.take() == running
    assert attempt.model == "llama-3-8b"
    assert (await attempt_of(store, attempt.id)).model == "llama-3-8b"
    kinds = [(e.kind, e.data) for e in await store.jobs.list_events(job.id)]
    assert kinds[-2:] == [
        ("provider.skipped", {"provider": "b", "why": "circuit open"}),
        ("attempt.started", {"attempt_id": attempt.id, "provider": "a", "seq": 1}),
    ]


async def test_a_lost_race_names_the_winner_and_the_winner_its_finish(store: SqlStore) -> None:
    """Kills finish_attempt_cas mutants that drop the loser's error, the winner's finished_at
    or the data of `attempt.succeeded`, `job.succeeded` and `attempt.lost`."""
    job = await submit(store)
    first = await start(store, job, "a")
    second = await start(store, job, "b")
    won = await store.jobs.finish_attempt_cas(second.id, {"text": "b"}, NO_USAGE)
    lost = await store.jobs.finish_attempt_cas(first.id, {"text": "a"}, NO_USAGE)
    assert won.won and not lost.won
    assert won.attempt.finished_at is not None and won.attempt.finished_at >= second.started_at
    assert (await attempt_of(store, second.id)).finished_at == won.attempt.finished_at
    assert lost.attempt.state is AttemptState.LOST
    assert lost.attempt.error == f"finished after {second.id} won"
    events = {event.kind: event.data for event in await store.jobs.list_events(job.id)}
    assert events["attempt.succeeded"] == {"attempt_id": second.id, "provider": "b"}
    assert events["job.succeeded"] == {"winner_attempt_id": second.id}
    assert events["attempt.lost"] == {
        "attempt_id": first.id,
        "provider": "a",
        "winner_attempt_id": second.id,
    }
