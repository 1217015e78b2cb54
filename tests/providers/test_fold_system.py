"""Formats without a system role get the system text folded into the first user turn (as
Gemma's own template does) instead of silently losing it; other formats are untouched."""

from __future__ import annotations

from jobrouter.providers import Message
from jobrouter.providers.chat_formats import fold_system, render

SYSTEM = Message(role="system", content="Answer with JSON only.")
USER = Message(role="user", content="Product: Saffron tea.")


def test_gemma_gets_the_system_text_in_the_first_user_turn() -> None:
    folded = fold_system("gemma", (SYSTEM, USER))
    expected = Message(role="user", content="Answer with JSON only.\n\nProduct: Saffron tea.")
    assert folded == (expected,)
    rendered = render("gemma", folded)
    assert rendered is not None and "Answer with JSON only." in rendered.text


def test_without_folding_gemma_loses_the_system_text() -> None:
    rendered = render("gemma", (SYSTEM, USER))
    assert rendered is not None and "Answer with JSON only." not in rendered.text


def test_a_format_with_a_system_role_is_untouched() -> None:
    messages = (SYSTEM, USER)
    assert fold_system("chatml", messages) is messages
    assert fold_system(None, messages) is messages


def test_no_system_message_means_no_change() -> None:
    messages = (USER,)
    assert fold_system("gemma", messages) is messages


def test_system_only_becomes_a_user_turn() -> None:
    assert fold_system("gemma", (SYSTEM,)) == (Message(role="user", content=SYSTEM.content),)
