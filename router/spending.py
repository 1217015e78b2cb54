"""The job path's port to budgets: what an attempt must reserve before its provider is called,
what a refused reservation means for the job, and whether a submit is refused at the door.

Built once per process from `[budgets]` and the providers' prices (`jobrouter.providers.pricing`,
resolved once, here, for the providers a budget may charge). With no budget configured it
does nothing and costs nothing: `reservation` returns None before it looks at the request.

The rules, each in one place:
- a start reserves `jobrouter.reservations.worst_case` against every budget that covers it
  (`reservation`), charged by the store in the attempt's transaction;
- a start a budget refuses (`BudgetCrossed`) or cannot hold (`BudgetUnheld`) holds back the
  providers it refuses (`held_back`): only the refused provider for a provider budget (the job
  goes on to the next certified one), every provider of the job for an owner, task or global
  budget. By the task's `on_budget`, a crossed budget is waited out (`wait`: looked at again
  when room may have freed, at the period's end at the latest) or ends the job (`fail`); a
  budget that cannot hold the attempt is a configuration to fix, and waiting never fixes it;
- a submit is refused at the door (`BudgetExhausted`) when an owner, task or global budget that
  covers it has nothing left in its period (`exhausted`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping

from jobrouter.budgets import covering, period_at
from jobrouter.config_budgets import BudgetConfig
from jobrouter.errors import BudgetCrossed, BudgetExhausted, BudgetUnheld
from jobrouter.persist import persist
from jobrouter.policy import Eligibility
from jobrouter.providers import CompletionRequest
from jobrouter.providers.pricing import Pricing
from jobrouter.reservations import worst_case
from jobrouter.store.spend import Reservation, SpendLedger

# A job waiting for room looks again this often: room frees as attempts in flight settle to
# their actual cost (below the worst case they reserved), long before the period ends.
RECHECK_S = 30.0
Clock = Callable[[], float]


class Spending:
    def __init__(
        self,
        budgets: Mapping[str, BudgetConfig],
        prices: Callable[[str], Pricing],
        clock: Clock = time.time,
    ) -> None:
        """`prices(provider)`: the provider's price, resolved once (called only when a budget
        may charge the provider)."""
        self.budgets = dict(budgets)
        self._prices = prices
        # the budgets whose period is a rolling window: the ledger reads them as their buckets
        self._rolling = frozenset(n for n, b in self.budgets.items() if b.period == "rolling")
        self._priced: dict[str, Pricing] = {}
        self._clock = clock

    @property
    def active(self) -> bool:
        return bool(self.budgets)

    def covers(self, owner: str, task: str, providers: Iterable[str]) -> bool:
        """Whether any budget may charge an attempt of `owner`'s job of `task`."""
        if not self.budgets:
            return False
        if covering(self.budgets, owner=owner, task=task, provider=None):
            return True
        return any(
            covering(self.budgets, owner=owner, task=task, provider=name) for name in providers
        )

    def reservation(
        self, *, owner: str, task: str, provider: str, request: CompletionRequest
    ) -> Reservation | None:
        """What an attempt on `provider` reserves: None when no budget covers it;
        BudgetUnheld when a covering budget cannot hold it."""
        if not self.budgets:
            return None
        names = covering(self.budgets, owner=owner, task=task, provider=provider)
        if not names:
            return None
        return worst_case(
            self.budgets,
            names,
            self._price(provider),
            prompt_bytes=prompt_bytes(request),
            max_tokens=request.max_tokens,
            now=self._clock(),
        )

    def held_back(
        self,
        refusal: BudgetCrossed | BudgetUnheld,
        provider: str,
        providers: Iterable[str],
        *,
        on_budget: str,
    ) -> dict[str, Eligibility]:
        """The providers a refused start holds back for the job, each with the reason (it goes
        on the job's log) and, when the job waits the budget out, when to look again."""
        budget = self.budgets[refusal.budget]
        retry_at = None
        if isinstance(refusal, BudgetCrossed) and on_budget == "wait":
            now = self._clock()
            retry_at = min(period_at(budget, now).end, now + RECHECK_S)
        verdict = Eligibility(False, f"{refusal}", retry_at)
        refused = [provider] if budget.scope == "provider" else list(providers)
        return dict.fromkeys(refused, verdict)

    async def door(self, ledger: SpendLedger, owner: str, task: str) -> BudgetExhausted | None:
        """The refusal of a submit of `owner`'s job of `task` whose owner, task or global
        budget has nothing left this period (one read per such budget; none without one)."""
        periods = self.door_periods(owner, task)
        if not periods:
            return None
        return self.refusal(await persist(lambda: ledger.charged(periods, self._rolling)))

    def door_periods(self, owner: str, task: str) -> list[tuple[str, float]]:
        """The owner, task and global budgets a submit of `owner`'s job of `task` must find room
        in, as (name, the start of its current period): what the store reads for `refusal`."""
        if not self.budgets:
            return []
        now = self._clock()
        names = covering(self.budgets, owner=owner, task=task, provider=None)
        return [(name, period_at(self.budgets[name], now).start) for name in names]

    def refusal(self, charged: Mapping[str, tuple[float, int]]) -> BudgetExhausted | None:
        """The refusal of a submit whose budget has nothing left: `charged` is each door
        budget's (USD, tokens) charged in its current period (reserved and actual)."""
        now = self._clock()
        for name in sorted(charged):
            budget, (usd, tokens) = self.budgets[name], charged[name]
            for side, spent, limit in (("usd", usd, budget.usd), ("tokens", tokens, budget.tokens)):
                if limit is not None and spent >= limit:
                    ends = period_at(budget, now).end
                    return BudgetExhausted(
                        budget=name,
                        side=side,
                        limit=limit,
                        spent=spent,
                        retry_after=max(1.0, ends - now),
                    )
        return None

    def _price(self, provider: str) -> Pricing:
        price = self._priced.get(provider)
        if price is None:
            price = self._priced[provider] = self._prices(provider)
        return price


def prompt_bytes(request: CompletionRequest) -> int:
    """An upper bound of the request's prompt tokens: the UTF-8 bytes of its messages with their
    roles and JSON framing, and of its output schema (providers with structured output count the
    schema in the prompt). A byte-level BPE token is at least one byte; a chat template's own
    markers are fewer tokens than the framing they stand in for."""
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    size = len(json.dumps(messages, ensure_ascii=False).encode())
    if request.output_schema is not None:
        size += len(json.dumps(request.output_schema, ensure_ascii=False).encode())
    return size
