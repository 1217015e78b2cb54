"""Dotted paths into a JSON output: ``price.amount``, ``items.0.name``; ``$`` or ``""`` is the root.

A leading ``$.`` is accepted too. A segment that is a decimal integer indexes a list. A path that
does not exist resolves to `MISSING` (never to None, which is a real JSON null).
"""

from __future__ import annotations

import json
from typing import Any, Final


class _Missing:
    """The value at a path that does not exist in the output."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()


def split_path(path: str) -> tuple[str, ...]:
    """The segments of a dotted path (empty for the root)."""
    path = path.strip()
    if path in ("", "$"):
        return ()
    if path.startswith("$."):
        path = path[2:]
    return tuple(path.split("."))


def resolve(output: Any, path: str) -> Any:
    """The value at `path` in `output`, or `MISSING`."""
    current = output
    for segment in split_path(path):
        if isinstance(current, dict):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list) and segment.isdecimal():
            index = int(segment)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def show(value: Any) -> str:
    """A short, stable text for a found value in evidence: canonical JSON or ``<missing>``."""
    if value is MISSING:
        return "<missing>"
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
