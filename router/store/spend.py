"""The budget ledger: an attempt's worst case reserved against every budget that covers it, in
the caller's write transaction (the one that writes the attempt row), and settled to its actual
cost when it ends. A part of the store, over the connector's named queries.

One counter row per budget and period (`budget_spend`; a rolling budget has one per bucket of
its window, and an anchor row its charges lock: `_charge`): a reservation is a conditional
UPDATE of each covering budget's row (`charge_budget`: no row back when the charge would cross a
cap), in name order so two writers lock the rows in one order. On PostgreSQL the row lock makes
each check and charge one step under any number of routers (a waiting UPDATE re-reads the
committed row under READ COMMITTED); on SQLite the one writer does. A reservation one budget
refuses takes back what it charged the others in the same transaction: it changes nothing, and
says which budget refused, its cap and what it had charged.

Every start path charges an `AttemptStart`'s `Reservation` in the transaction that writes the
attempt row (`reserve_in`, `charge_in`), and every end settles what the attempt holds in the
transaction that writes its end (`settle_in`, from transitions.end_attempt). What a start
reserves is the job path's (`jobrouter.spending`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from jobrouter.store.connector import Connector, Row, Tx

Queries = Mapping[str, str]


# A rolling budget's anchor row: every charge of the budget locks it first (so a check that sums
# the window's buckets sees every charge committed before it); it holds no spend.
ANCHOR = -1.0


@dataclass(frozen=True)
class Hold:
    """A budget's period a reservation is held against, with its caps (None: uncapped side).
    `window_from`: a rolling budget's first bucket in the window: `period_start` is then the
    bucket charged, and the cap is checked against the rows from `window_from` on (a bucket
    ahead of the charged one too: jobrouter.budgets); None: a calendar period, whose one row
    is `period_start`."""

    budget: str
    period_start: float
    usd_cap: float | None
    token_cap: int | None
    window_from: float | None = None


@dataclass(frozen=True)
class Crossed:
    """A reservation a budget refused: the budget, the side it crossed, its cap, its charge."""

    budget: str
    side: str  # "usd" or "tokens"
    limit: float
    charged: float


@dataclass(frozen=True)
class Period:
    """A budget's counters in one period, as stored."""

    budget: str
    period_start: float
    charged_usd: float
    charged_tokens: int
    reserved_usd: float
    reserved_tokens: int
    actual_usd: float
    actual_tokens: int


@dataclass(frozen=True)
class Reservation:
    """An attempt's worst case (`usd`, `tokens`) and the budgets' periods it is held against:
    given with an `AttemptStart`, charged in the transaction that writes the attempt row."""

    holds: tuple[Hold, ...]
    usd: float
    tokens: int


class SpendLedger:
    """Reservations against budgets, and their settlement."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def reserve_in(
        self, tx: Tx, attempt_id: str, holds: Sequence[Hold], usd: float, tokens: int
    ) -> Crossed | None:
        """Charge `usd` and `tokens` to every hold's budget for `attempt_id`, or to none: the
        first budget that would be crossed (None: all charged)."""
        return await reserve_in(self._q, tx, attempt_id, Reservation(tuple(holds), usd, tokens))

    async def settle_in(self, tx: Tx, attempt_id: str, usd: float, tokens: int) -> None:
        """The attempt's reservations become its actual cost (`usd`, `tokens`)."""
        await settle_in(self._q, tx, attempt_id, Actual(usd, tokens))

    async def charged(
        self, periods: Sequence[tuple[str, float]], rolling: Collection[str] = ()
    ) -> dict[str, tuple[float, int]]:
        """Each budget's (USD, tokens) charged, reserved and actual, in the given period (a
        period nothing was charged in yet: 0): `(budget, period_start)`, a calendar period's
        row, or for a budget named in `rolling` its window's first bucket (the buckets from
        it on are summed, as its check sums them)."""
        found: dict[str, tuple[float, int]] = {}
        for budget, start in periods:
            if budget in rolling:
                query, params = "budget_window_charged", {"budget": budget, "window_from": start}
            else:
                query, params = "budget_charged", {"budget": budget, "period_start": start}
            row = await self.connector.fetchone(self._q[query], params)
            found[budget] = (0.0, 0) if row is None else (row["charged_usd"], row["charged_tokens"])
        return found

    async def periods(self) -> list[Period]:
        rows = await self.connector.fetchall(self._q["budget_periods"], {})
        return [Period(**{k: row[k] for k in Period.__dataclass_fields__}) for row in rows]


async def reserve_in(
    q: Queries, tx: Tx, attempt_id: str, reservation: Reservation
) -> Crossed | None:
    """Charge `reservation` to every budget it holds, for `attempt_id`, or to none: the first
    budget that would be crossed (None: all charged and the holds recorded)."""
    crossed = await charge_in(q, tx, reservation)
    if crossed is None:
        await record_holds_in(q, tx, attempt_id, reservation)
    return crossed


@dataclass(frozen=True)
class Actual:
    """What an ended attempt is settled at: `usd` None when its price is unknown (a hold that
    reserved USD then stays charged: a cost unknown is never taken as 0)."""

    usd: float | None
    tokens: int


NOTHING_SENT = Actual(0.0, 0)


async def settle_in(q: Queries, tx: Tx, attempt_id: str, actual: Actual) -> None:
    """The attempt's open holds become `actual`, once each (a settled hold is not settled
    again, so a resolution after an end that settled changes nothing). A hold that reserved
    USD stays charged when `actual.usd` is unknown."""
    holds = await tx.fetchall(q["open_holds_of_attempt"], {"attempt_id": attempt_id})
    for hold in holds:
        if actual.usd is None and hold["usd"] > 0:
            continue
        await tx.execute(
            q["settle_budget"],
            {
                "budget": hold["budget"],
                "period_start": hold["period_start"],
                "reserved_usd": hold["usd"],
                "reserved_tokens": hold["tokens"],
                "usd": actual.usd or 0.0,
                "tokens": actual.tokens,
            },
        )
        await tx.execute(q["settle_hold"], {"attempt_id": attempt_id, "budget": hold["budget"]})


async def lock_periods_in(q: Queries, tx: Tx, reservations: Sequence[Reservation]) -> None:
    """Lock every budget row the `reservations` will charge, in name order, before any is
    charged. Each reservation charges its own budgets in name order, but one transaction
    charging several (a claim's first attempts) would otherwise lock, say, `b` for one job
    and then `a` for the next, while another router's start holds `a` and waits for `b`: a
    deadlock PostgreSQL ends by aborting one of them."""
    periods = sorted({row for r in reservations for h in r.holds for row in _rows(h)})
    for budget, period_start in periods:
        params = {"budget": budget, "period_start": period_start}
        await tx.execute(q["open_budget_period"], params)
        await tx.execute(q["lock_budget_period"], params)


async def charge_in(q: Queries, tx: Tx, reservation: Reservation) -> Crossed | None:
    """Charge every hold's budget, in name order, or none (the first that would be crossed,
    its charges to the others taken back). Records no hold: see `record_holds_in`."""
    usd, tokens = reservation.usd, reservation.tokens
    charged: list[Hold] = []
    for hold in sorted(reservation.holds, key=lambda h: (h.budget, h.period_start)):
        row = await _charge(q, tx, hold, usd, tokens)
        if row is None:
            crossed = await _crossed(q, tx, hold, usd)
            await take_back_in(q, tx, Reservation(tuple(charged), usd, tokens))
            return crossed
        charged.append(hold)
    return None


async def _charge(q: Queries, tx: Tx, hold: Hold, usd: float, tokens: int) -> Row | None:
    """One budget's check and charge (no row back: refused). A rolling budget's anchor is
    locked first, in its own statement: the charge's statement then reads the window after
    every other charge of the budget has committed or waits behind this one (under READ
    COMMITTED a statement that waited on a row lock re-reads only that row, so the lock and
    the sum must not be one statement)."""
    params: dict[str, object] = {"budget": hold.budget, "period_start": hold.period_start}
    query = "charge_budget"
    if hold.window_from is not None:
        anchor = {"budget": hold.budget, "period_start": ANCHOR}
        await tx.execute(q["open_budget_period"], anchor)
        await tx.execute(q["lock_budget_period"], anchor)
        params["window_from"] = hold.window_from
        query = "charge_budget_window"
    await tx.execute(q["open_budget_period"], {k: params[k] for k in ("budget", "period_start")})
    caps = {
        "usd_cap": math.inf if hold.usd_cap is None else hold.usd_cap,
        "token_cap": _token_cap(hold.token_cap),
    }
    return await tx.fetchone(q[query], {**params, "usd": usd, "tokens": tokens, **caps})


def _rows(hold: Hold) -> list[tuple[str, float]]:
    """The ledger rows a charge of `hold` locks, in lock order: a rolling budget's anchor first."""
    if hold.window_from is None:
        return [(hold.budget, hold.period_start)]
    return [(hold.budget, ANCHOR), (hold.budget, hold.period_start)]


async def record_holds_in(q: Queries, tx: Tx, attempt_id: str, reservation: Reservation) -> None:
    """What `attempt_id` holds of each budget `charge_in` charged, until it is settled."""
    for hold in reservation.holds:
        await tx.execute(
            q["insert_budget_hold"],
            {
                "attempt_id": attempt_id,
                "budget": hold.budget,
                "period_start": hold.period_start,
                "usd": reservation.usd,
                "tokens": reservation.tokens,
            },
        )


async def take_back_in(q: Queries, tx: Tx, reservation: Reservation) -> None:
    """Take back the charges `charge_in` made in this transaction (no hold recorded)."""
    for hold in reservation.holds:
        await tx.execute(
            q["uncharge_budget"],
            {
                "budget": hold.budget,
                "period_start": hold.period_start,
                "usd": reservation.usd,
                "tokens": reservation.tokens,
            },
        )


async def _crossed(q: Queries, tx: Tx, hold: Hold, usd: float) -> Crossed:
    if hold.window_from is None:
        params = {"budget": hold.budget, "period_start": hold.period_start}
        row = await tx.fetchone(q["budget_charged"], params)
    else:
        window = {"budget": hold.budget, "window_from": hold.window_from}
        row = await tx.fetchone(q["budget_window_charged"], window)
    assert row is not None  # opened above, in this transaction
    if hold.usd_cap is not None and row["charged_usd"] + usd > hold.usd_cap:
        return Crossed(hold.budget, "usd", hold.usd_cap, row["charged_usd"])
    assert hold.token_cap is not None
    return Crossed(hold.budget, "tokens", hold.token_cap, row["charged_tokens"])


def _token_cap(cap: int | None) -> int:
    # BIGINT's largest value stands for "uncapped" (an integer column compared with +infinity
    # is a type error on PostgreSQL)
    return 2**63 - 1 if cap is None else cap
