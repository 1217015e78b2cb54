"""Live evidence in the store (issue 27): a verdict per answered attempt, written on the
attempt's row by the UPDATE that ends it (columns `verdict`, `verdict_at`; migration 0018), a
golden probe's in `probe_verdicts` (it has no attempt), and per provider x contract the watch
the leader folds them into, with its suspension. `LiveWatchStore` is `SqlStore.live_watch`;
the decisions are router/watch.py's (and jobrouter.drift's), the store only keeps what they
need exactly once: a fold reads the watches and marks folded (a probe's: deletes) the verdicts
it counts in the transaction that writes the new watches (an operator's reinstatement cannot
slip between), and a fold that finds its verdicts gone (another leader's, during a takeover)
writes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobrouter.models import new_id
from jobrouter.store.connector import Connector, Row, Tx

RECENT_FAILURES = 5  # failed attempts a watch keeps as its sample of evidence
POINTS_KEPT = 60  # folds a pair's history keeps for the console's chart (migration 0020)
Watches = dict[tuple[str, str], "WatchRow"]


@dataclass(frozen=True)
class LiveVerdict:
    """What the router judged of one answer (no extra call: the checks it runs anyway).
    `rendering_off`: the provider's prompt count against ours, out of tolerance (True), within
    (False), or not compared (None: no count of ours, or no usage reported)."""

    attempt_id: str  # a probe's: "probe:<case>" (it has no attempt row)
    provider: str
    contract: str
    failed: bool
    failure: str | None = None
    rendering_off: bool | None = None
    probe: bool = False  # a golden case the leader sent, not an owner's job
    prompt_tokens: int | None = None  # the provider's count of what it read (its usage)
    prompt_chars: int | None = None  # the characters of the messages sent


@dataclass(frozen=True)
class StoredVerdict:
    """A verdict not folded yet: `id` is its attempt's (a live one) or its probe row's, `at`
    when it was written (the fold's order)."""

    id: str
    verdict: LiveVerdict
    at: float


@dataclass(frozen=True)
class Suspension:
    """Why a provider lost a contract's traffic: the rule that fired and its evidence."""

    at: float
    rule: str
    reason: str
    answered: int
    failed: int
    sample_attempts: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "rule": self.rule,
                "reason": self.reason,
                "answered": self.answered,
                "failed": self.failed,
                "sample_attempts": list(self.sample_attempts),
            }
        )

    @classmethod
    def from_row(cls, at: float, text: str) -> Suspension:
        data = json.loads(text)
        return cls(
            at=at,
            rule=data["rule"],
            reason=data["reason"],
            answered=int(data["answered"]),
            failed=int(data["failed"]),
            sample_attempts=tuple(data["sample_attempts"]),
        )


@dataclass(frozen=True)
class Reinstatement:
    at: float
    by: str
    reason: str


@dataclass(frozen=True)
class WatchPoint:
    """One fold of a pair, as its chart draws it: the answers it counted, how many broke the
    contract, the CUSUM statistics after them (1/SCALE nats), the baseline they were weighed
    against (0: not certified), and whether this fold suspended the pair."""

    at: float
    answered: int
    failed: int
    large: int
    small: int
    baseline: float
    suspended: bool


@dataclass(frozen=True)
class WatchRow:
    """A pair's watch: the rule's state (JSON of jobrouter.drift.Watch, "" for a fresh one), the
    counts since its certification or reinstatement, and its suspension if any."""

    provider: str
    contract: str
    state: str = ""
    answered: int = 0
    failed: int = 0
    rendering_checked: int = 0
    rendering_off: int = 0
    recent_failures: tuple[tuple[str, str], ...] = field(default=())
    suspension: Suspension | None = None
    reinstated: Reinstatement | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.provider, self.contract)


def verdict_columns(verdict: LiveVerdict | None, now: float) -> dict[str, Any]:
    """The attempt's `verdict` and `verdict_at` as its ending UPDATE writes them (None, None:
    no verdict; the UPDATE keeps any earlier one). The provider and the attempt are the row's."""
    if verdict is None:
        return {"verdict": None, "verdict_at": None}
    data = {
        "contract": verdict.contract,
        "failed": verdict.failed,
        "failure": verdict.failure,
        "rendering_off": verdict.rendering_off,
        "prompt_tokens": verdict.prompt_tokens,
        "prompt_chars": verdict.prompt_chars,
    }
    return {"verdict": _ENCODE(data), "verdict_at": now}


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # built once: see models._CANONICAL


class LiveWatchStore:
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def pending(self, limit: int) -> list[StoredVerdict]:
        """The oldest verdicts not folded yet (live and probes), in the order they were
        written."""
        q, params = self._q, {"limit": limit}
        live = await self.connector.fetchall(q["pending_attempt_verdicts"], params)
        probes = await self.connector.fetchall(q["pending_probe_verdicts"], params)
        stored = [_live(row) for row in live] + [_probe(row) for row in probes]
        return sorted(stored, key=lambda s: s.at)[:limit]

    async def watches(self) -> dict[tuple[str, str], WatchRow]:
        rows = await self.connector.fetchall(self._q["list_live_watch"], {})
        return {(row["provider"], row["contract"]): _watch(row) for row in rows}

    async def fold(
        self,
        consumed: Sequence[StoredVerdict],
        decide: Callable[[Watches], Iterable[WatchRow]],
        notify: Sequence[str] = (),
    ) -> bool:
        """In one transaction: the watches as they are (locked), `decide(watches)` the ones
        that counted `consumed`, written, those verdicts marked folded, and for each pair it
        newly suspended an outbox event `provider.suspended` to each owner of `notify` (I8: the
        event exactly when the suspension). False (nothing written) when some verdicts were
        gone: another fold counted them."""
        try:
            async with self.connector.write() as tx:
                if await _consume(self._q, tx, consumed) != len(consumed):
                    raise _Raced
                rows = await tx.fetchall(self._q["lock_live_watch"], {})
                current = {(row["provider"], row["contract"]): _watch(row) for row in rows}
                now = time.time()
                for watch in decide(current):
                    await save_watch(self._q, tx, watch, now)
                    before = current.get(watch.key)
                    fired = watch.suspension if before is None or not before.suspension else None
                    await _save_point(self._q, tx, before, watch, fired is not None, now)
                    if fired is not None:
                        await _announce(self._q, tx, watch, fired, notify, now)
        except _Raced:
            return False
        return True

    async def points(self) -> dict[tuple[str, str], list[WatchPoint]]:
        """Each pair's kept folds, oldest first."""
        rows = await self.connector.fetchall(self._q["list_live_watch_points"], {})
        found: dict[tuple[str, str], list[WatchPoint]] = {}
        for row in rows:
            found.setdefault((row["provider"], row["contract"]), []).append(_point(row))
        return found

    async def record_probe(self, verdict: LiveVerdict) -> None:
        """A golden probe's verdict (router/probes.py), folded like a live one."""
        async with self.connector.write() as tx:
            await tx.execute(
                self._q["insert_probe_verdict"],
                {
                    "attempt_id": verdict.attempt_id,
                    "provider": verdict.provider,
                    "contract": verdict.contract,
                    "failed": int(verdict.failed),
                    "failure": verdict.failure,
                    "now": time.time(),
                },
            )

    async def save(self, watch: WatchRow) -> None:
        async with self.connector.write() as tx:
            await save_watch(self._q, tx, watch, time.time())


class _Raced(Exception):
    """Rolls a fold back: its verdicts were counted by another."""


async def drop_pending_of_pair(queries: Mapping[str, str], tx: Tx, pair: Mapping[str, str]) -> None:
    """Before a fresh watch of `pair` (provider, contract): its verdicts not folded yet speak
    of what came before, and are never folded (a fold that read them finds them gone)."""
    await tx.execute(queries["drop_attempt_verdicts_of_pair"], pair)
    await tx.execute(queries["delete_probe_verdicts_of_pair"], pair)


async def _consume(queries: Mapping[str, str], tx: Tx, consumed: Sequence[StoredVerdict]) -> int:
    """Mark `consumed` folded; how many were still there to mark."""
    live = [s.id for s in consumed if not s.verdict.probe]
    probes = [s.id for s in consumed if s.verdict.probe]
    done = 0
    if live:
        done += await tx.execute(queries["consume_attempt_verdicts"], {"ids": json.dumps(live)})
    if probes:
        done += await tx.execute(queries["consume_probe_verdicts"], {"ids": json.dumps(probes)})
    return done


async def save_watch(queries: Mapping[str, str], tx: Tx, watch: WatchRow, now: float) -> None:
    suspension, reinstated = watch.suspension, watch.reinstated
    await tx.execute(
        queries["upsert_live_watch"],
        {
            "provider": watch.provider,
            "contract": watch.contract,
            "state": watch.state,
            "answered": watch.answered,
            "failed": watch.failed,
            "rendering_checked": watch.rendering_checked,
            "rendering_off": watch.rendering_off,
            "recent_failures": json.dumps([list(pair) for pair in watch.recent_failures]),
            "suspended_at": None if suspension is None else suspension.at,
            "suspension": None if suspension is None else suspension.to_json(),
            "reinstated_at": None if reinstated is None else reinstated.at,
            "reinstated_by": None if reinstated is None else reinstated.by,
            "reinstate_reason": None if reinstated is None else reinstated.reason,
            "now": now,
        },
    )


async def _save_point(
    queries: Mapping[str, str],
    tx: Tx,
    before: WatchRow | None,
    watch: WatchRow,
    fired: bool,
    now: float,
) -> None:
    """The fold's point of `watch`, and the pair's history trimmed to POINTS_KEPT, in the
    fold's transaction. A fold of probes only (no answer counted, none fired) draws nothing."""
    answered = watch.answered - (before.answered if before else 0)
    if answered <= 0 and not fired:
        return
    state = json.loads(watch.state) if watch.state else {}
    pair = {"provider": watch.provider, "contract": watch.contract}
    await tx.execute(
        queries["insert_live_watch_point"],
        {
            **pair,
            "at": now,
            "answered": answered,
            "failed": watch.failed - (before.failed if before else 0),
            "large": int(state.get("large", 0)),
            "small": int(state.get("small", 0)),
            "baseline": float(state.get("baseline", 0.0)),
            "suspended": int(fired),
        },
    )
    await tx.execute(queries["trim_live_watch_points"], {**pair, "keep": POINTS_KEPT})


SUSPENDED_EVENT = "provider.suspended"


async def _announce(
    queries: Mapping[str, str],
    tx: Tx,
    watch: WatchRow,
    suspension: Suspension,
    owners: Sequence[str],
    now: float,
) -> None:
    """The operators' event of a suspension, one outbox row per owner with a webhook. The
    row's `job_id` (one event per job elsewhere) is the suspension's own id."""
    payload = {
        "event": SUSPENDED_EVENT,
        "provider": watch.provider,
        "contract": watch.contract,
        "rule": suspension.rule,
        "reason": suspension.reason,
        "answered": suspension.answered,
        "failed": suspension.failed,
        "sample_attempts": list(suspension.sample_attempts),
        "suspended_at": suspension.at,
    }
    suspension_id = new_id()
    for owner in owners:
        await tx.execute(
            queries["insert_outbox"],
            {
                "id": new_id(),
                "job_id": f"suspension:{suspension_id}:{owner}",
                "owner": owner,
                "kind": SUSPENDED_EVENT,
                "payload": json.dumps({**payload, "owner": owner}),
                "now": now,
            },
        )


def _live(row: Row) -> StoredVerdict:
    data = json.loads(row["verdict"])
    off = data["rendering_off"]
    verdict = LiveVerdict(
        attempt_id=row["id"],
        provider=row["provider"],
        contract=data["contract"],
        failed=bool(data["failed"]),
        failure=data["failure"],
        rendering_off=None if off is None else bool(off),
        prompt_tokens=data["prompt_tokens"],
        prompt_chars=data["prompt_chars"],
    )
    return StoredVerdict(row["id"], verdict, float(row["verdict_at"]))


def _probe(row: Row) -> StoredVerdict:
    verdict = LiveVerdict(
        attempt_id=row["attempt_id"],
        provider=row["provider"],
        contract=row["contract"],
        failed=bool(row["failed"]),
        failure=row["failure"],
        probe=True,
    )
    return StoredVerdict(str(row["id"]), verdict, float(row["at"]))


def _point(row: Row) -> WatchPoint:
    return WatchPoint(
        at=float(row["at"]),
        answered=int(row["answered"]),
        failed=int(row["failed"]),
        large=int(row["large"]),
        small=int(row["small"]),
        baseline=float(row["baseline"]),
        suspended=bool(row["suspended"]),
    )


def _watch(row: Row) -> WatchRow:
    suspension = None
    if row["suspended_at"] is not None:
        suspension = Suspension.from_row(float(row["suspended_at"]), row["suspension"])
    reinstated = None
    if row["reinstated_at"] is not None:
        reinstated = Reinstatement(
            float(row["reinstated_at"]), row["reinstated_by"] or "", row["reinstate_reason"] or ""
        )
    return WatchRow(
        provider=row["provider"],
        contract=row["contract"],
        state=row["state"],
        answered=int(row["answered"]),
        failed=int(row["failed"]),
        rendering_checked=int(row["rendering_checked"]),
        rendering_off=int(row["rendering_off"]),
        recent_failures=tuple((a, f) for a, f in json.loads(row["recent_failures"])),
        suspension=suspension,
        reinstated=reinstated,
    )
