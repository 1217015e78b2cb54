"""docs/config-reference.md is generated from the pydantic models: it must be current, and
every key must say what it does."""

from __future__ import annotations

from pathlib import Path

from jobrouter.config_doc import description, keys, render_reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"


def test_the_checked_in_reference_is_current() -> None:
    assert PAGE.read_text("utf-8") == render_reference(), (
        "docs/config-reference.md is stale: run `jobrouter config reference > "
        "docs/config-reference.md`"
    )


def test_every_key_is_described() -> None:
    missing = [key for key, info in keys() if not description(key, info)]
    assert missing == [], (
        "describe these keys (a Field description or an entry in "
        f"router/config_doc.NOTES): {missing}"
    )
