"""Per-instance memo for values derived from an immutable object (compiled templates, validators).

Contracts are frozen pydantic models, so anything computed from one stays valid for the life of
that instance. The memo is keyed by object identity and dropped when the object is collected; a
copy (`model_copy(update=...)`) is a new object and gets a fresh memo, so it never sees values
derived from the original. Kept outside the model so that model equality ignores it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

_memos: dict[int, dict[str, Any]] = {}


def derived(owner: object, key: str, build: Callable[[], T]) -> T:
    """`build()` once per (`owner`, `key`); later calls return the stored value."""
    memo = _memos.get(id(owner))
    if memo is None:
        memo = {}
        _memos[id(owner)] = memo
        weakref.finalize(owner, _memos.pop, id(owner), None)
    if key not in memo:
        memo[key] = build()
    return cast(T, memo[key])
