"""Templates and the small formatting filters they use (times, JSON, money)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates

templates = Jinja2Templates(directory=Path(__file__).with_name("templates"))


def _when(value: datetime | float | None) -> str:
    if value is None:
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromtimestamp(value, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _money(value: float | None) -> str:
    return "" if value is None else f"${value:.6f}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.0f} ms"


# Every console page: never framed (its buttons cancel and resolve jobs: click-jacking), never
# kept by the browser (a page of jobs must not outlive the sign-out).
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
}


def _pct(value: float) -> str:
    """A position on a time axis, as a CSS length."""
    return f"{value:.2f}%"


templates.env.filters.update(when=_when, pretty=_pretty, money=_money, ms=_ms, pct=_pct)
