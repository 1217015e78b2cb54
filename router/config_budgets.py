"""`[budgets.NAME]`: a cap on spend, in USD and/or tokens, over a period, for one owner, task or
provider, or for everything (global). Kept apart from config.py, which `RouterConfig` imports it
into; what a budget's period is at a moment is `jobrouter.budgets`.

    [budgets.shop1_daily]
    owner = "shop-1"          # or task = "...", or provider = "..."; none of them: global
    period = "day"            # "day" / "month" (UTC calendar), or "rolling" with window = seconds
    usd = 5.0                 # and/or tokens = 1_000_000

The name (the table's key) is what a refusal and `jobrouter spend` call the budget.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

BUDGET_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
Scope = Literal["owner", "task", "provider", "global"]
Period = Literal["day", "month", "rolling"]


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    owner: str | None = Field(default=None, min_length=1, description="the owner it caps")
    task: str | None = Field(default=None, min_length=1, description="the task it caps")
    provider: str | None = Field(default=None, min_length=1, description="the provider it caps")
    period: Period = Field(
        description="`day` or `month` (UTC calendar: the spend starts again at 00:00 UTC, on the "
        "1st), or `rolling` (the last `window` seconds, counted in 60 buckets of `window / 60`: "
        "the cap holds over any `window - window / 60` seconds; docs/spend.md)"
    )
    window: float | None = Field(
        default=None, gt=0, description="seconds of a `rolling` period (only with rolling)"
    )
    usd: float | None = Field(default=None, gt=0, description="the cap in USD per period")
    tokens: int | None = Field(
        default=None, gt=0, description="the cap in tokens (prompt + completion) per period"
    )

    @property
    def scope(self) -> Scope:
        """What the budget covers: the one of owner / task / provider it names, else global."""
        if self.owner is not None:
            return "owner"
        if self.task is not None:
            return "task"
        if self.provider is not None:
            return "provider"
        return "global"

    @property
    def covers(self) -> str | None:
        """The owner, task or provider the budget caps (None: global)."""
        return self.owner or self.task or self.provider

    @model_validator(mode="after")
    def _one_scope(self) -> BudgetConfig:
        named = [key for key in ("owner", "task", "provider") if getattr(self, key) is not None]
        if len(named) > 1:
            raise ValueError(
                f"a budget caps one owner, task or provider (or, with none, everything); "
                f"this one names {' and '.join(named)}: make one budget for each"
            )
        return self

    @model_validator(mode="after")
    def _a_cap(self) -> BudgetConfig:
        if self.usd is None and self.tokens is None:
            raise ValueError("a budget needs a cap: usd = ... and/or tokens = ...")
        return self

    @model_validator(mode="after")
    def _window_with_rolling(self) -> BudgetConfig:
        if self.period == "rolling" and self.window is None:
            raise ValueError('period = "rolling" needs window = <seconds>, e.g. 3600')
        if self.period != "rolling" and self.window is not None:
            raise ValueError(
                f'window is the length of a "rolling" period; period = "{self.period}" is a '
                'UTC calendar period: remove window, or set period = "rolling"'
            )
        return self
