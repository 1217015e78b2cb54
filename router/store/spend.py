"""The budget ledger: an attempt's worst case reserved against every budget that covers it, in
the caller's write transaction (the one that writes the attempt row), and settled to its actual
cost when it ends. A part of the store, over the connector's named queries.

One counter row per budget and period (`budget_spend`): a reservation is a conditional UPDATE
of each covering budget's row (`charge_budget`: no row back when the charge would cross a cap),
in name order so two writers lock the rows in one order. On PostgreSQL the row lock makes each
check and charge one step under any number of routers (a waiting UPDATE re-reads the committed
row under READ COMMITTED); on SQLite the one writer does. A reservation one budget refuses takes
back what it charged the others in the same transaction: it changes nothing, and says which
budget refused, its cap and what it had charged.

Not wired into the attempt paths yet (docs/spend.md): `[budgets]` is refused by the config until
it is, so no cap is accepted and not held.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from jobrouter.store.connector import Connector, Tx


@dataclass(frozen=True)
class Hold:
    """A budget's period a reservation is held against, with its caps (None: uncapped side)."""

    budget: str
    period_start: float
    usd_cap: float | None
    token_cap: int | None


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
        charged: list[Hold] = []
        for hold in sorted(holds, key=lambda h: (h.budget, h.period_start)):
            params = {"budget": hold.budget, "period_start": hold.period_start}
            await tx.execute(self._q["open_budget_period"], params)
            row = await tx.fetchone(
                self._q["charge_budget"],
                {
                    **params,
                    "usd": usd,
                    "tokens": tokens,
                    "usd_cap": math.inf if hold.usd_cap is None else hold.usd_cap,
                    "token_cap": _token_cap(hold.token_cap),
                },
            )
            if row is None:
                crossed = await self._crossed(tx, hold, usd)
                await self._take_back(tx, charged, usd, tokens)
                return crossed
            charged.append(hold)
        for hold in charged:
            await tx.execute(
                self._q["insert_budget_hold"],
                {
                    "attempt_id": attempt_id,
                    "budget": hold.budget,
                    "period_start": hold.period_start,
                    "usd": usd,
                    "tokens": tokens,
                },
            )
        return None

    async def settle_in(self, tx: Tx, attempt_id: str, usd: float, tokens: int) -> None:
        """The attempt's reservations become its actual cost (`usd`, `tokens`)."""
        holds = await tx.fetchall(self._q["open_holds_of_attempt"], {"attempt_id": attempt_id})
        for hold in holds:
            await tx.execute(
                self._q["settle_budget"],
                {
                    "budget": hold["budget"],
                    "period_start": hold["period_start"],
                    "reserved_usd": hold["usd"],
                    "reserved_tokens": hold["tokens"],
                    "usd": usd,
                    "tokens": tokens,
                },
            )
            await tx.execute(
                self._q["settle_hold"], {"attempt_id": attempt_id, "budget": hold["budget"]}
            )

    async def periods(self) -> list[Period]:
        rows = await self.connector.fetchall(self._q["budget_periods"], {})
        return [Period(**{k: row[k] for k in Period.__dataclass_fields__}) for row in rows]

    async def _crossed(self, tx: Tx, hold: Hold, usd: float) -> Crossed:
        params = {"budget": hold.budget, "period_start": hold.period_start}
        row = await tx.fetchone(self._q["budget_charged"], params)
        assert row is not None  # opened above, in this transaction
        if hold.usd_cap is not None and row["charged_usd"] + usd > hold.usd_cap:
            return Crossed(hold.budget, "usd", hold.usd_cap, row["charged_usd"])
        assert hold.token_cap is not None
        return Crossed(hold.budget, "tokens", hold.token_cap, row["charged_tokens"])

    async def _take_back(self, tx: Tx, charged: Sequence[Hold], usd: float, tokens: int) -> None:
        for hold in charged:
            await tx.execute(
                self._q["uncharge_budget"],
                {
                    "budget": hold.budget,
                    "period_start": hold.period_start,
                    "usd": usd,
                    "tokens": tokens,
                },
            )


def _token_cap(cap: int | None) -> int:
    # BIGINT's largest value stands for "uncapped" (an integer column compared with +infinity
    # is a type error on PostgreSQL)
    return 2**63 - 1 if cap is None else cap
