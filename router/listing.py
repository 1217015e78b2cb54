"""Listing jobs: the filter every edge (HTTP, CLI, dashboard) hands to the store, and the page
it gets back.

Pages are keyset pages, newest first: job ids are time-ordered (UUIDv7), so the cursor is the
last id of a page and the next page is `id < cursor` down an index, as fast on the millionth job
as on the first (no OFFSET). Creation-time bounds also become id bounds (an id starts with its
millisecond), so they seek the same index; the exact `created_at` test is kept beside them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from jobrouter.errors import ListingError
from jobrouter.models import Job
from jobrouter.states import JobState

MAX_PAGE = 500
DEFAULT_PAGE = 50
_CURSOR = re.compile(r"[0-9a-f]{32}")
# created_at is taken a moment before the id's millisecond: bound ids one second wider than
# asked and let the exact created_at test decide.
_ID_SLACK_MS = 1_000
# Times are shown (and read back) to the microsecond, rounded: compare at that resolution, so
# a job's own shown `created_at` passed as `created_after` finds it and as `created_before` not.
_HALF_US = 0.5e-6


def attention_states() -> tuple[JobState, ...]:
    """The job states that wait for a person (states are data: `JobState.needs_attention`)."""
    return tuple(state for state in JobState if state.needs_attention)


@dataclass(frozen=True)
class JobFilter:
    """Which jobs to list. `owner=None` means every owner: only an operator may ask that, which
    the edges enforce (an owner's filter always carries its own name). `states` empty means any
    state; several states mean any of them."""

    owner: str | None = None
    states: tuple[JobState, ...] = ()
    task: str | None = None
    provider: str | None = None
    created_after: float | None = None
    created_before: float | None = None
    # One key's jobs: one job under an owner (the key is owner-scoped), one per owner without.
    idempotency_key: str | None = None
    empty: bool = False  # the filters contradict each other: nothing can match

    @classmethod
    def of(
        cls,
        *,
        owner: str | None = None,
        state: JobState | None = None,
        needs_attention: bool = False,
        task: str | None = None,
        provider: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
    ) -> JobFilter:
        """The filter of the listing options every edge offers. `state` together with
        `needs_attention` means both: a state that needs no attention matches nothing."""
        states: tuple[JobState, ...] = (state,) if state is not None else ()
        empty = False
        if needs_attention:
            wanted = attention_states()
            states = tuple(s for s in states if s in wanted) if states else wanted
            empty = not states
        return cls(
            owner=owner,
            states=states,
            task=task,
            provider=provider,
            created_after=None if created_after is None else created_after - _HALF_US,
            created_before=None if created_before is None else created_before - _HALF_US,
            empty=empty,
        )

    def any_state(self) -> JobFilter:
        """The same filter over every state: what the counts by state are taken over."""
        return replace(self, states=(), empty=False)


@dataclass(frozen=True)
class JobPage:
    items: Sequence[Job]
    next_cursor: str | None  # None: this was the last page


def checked_cursor(cursor: str | None) -> str | None:
    if cursor is not None and not _CURSOR.fullmatch(cursor):
        raise ListingError(
            f"cursor {cursor!r} is not one this server gave: pass the "
            "`next_cursor` of the previous page unchanged"
        )
    return cursor


def id_floor(epoch_s: float) -> str:
    """The smallest id a job created at `epoch_s` (or later) can have, less the slack."""
    ms = max(int(epoch_s * 1000) - _ID_SLACK_MS, 0)
    return f"{(ms & ((1 << 48) - 1)) << 80:032x}"


def id_ceiling(epoch_s: float) -> str:
    """An id above every id of a job created before `epoch_s`, plus the slack."""
    ms = min(max(int(epoch_s * 1000) + _ID_SLACK_MS, 0), (1 << 48) - 1)
    return f"{ms << 80:032x}"
