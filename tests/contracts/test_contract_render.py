"""Rendering: sandboxed, strict about undefined variables, compiled once per contract."""

from __future__ import annotations

from typing import Any

import pytest

import jobrouter.contracts.render as render_module
from jobrouter.contracts import (
    Contract,
    ExampleMessage,
    Prompt,
    RenderError,
    build_request,
    contract_from_data,
    render_messages,
)
from jobrouter.providers.base import Message


def with_prompt(contract: Contract, **prompt: Any) -> Contract:
    return contract.model_copy(update={"prompt": Prompt(**prompt)})


def test_renders_system_then_user(contract: Contract) -> None:
    assert render_messages(contract, {"review": "Nice <b>mug</b> & co"}) == (
        Message(role="system", content="Classify the review. Answer with JSON only."),
        Message(role="user", content="Review: Nice <b>mug</b> & co"),  # no HTML escaping
    )


def test_examples_sit_between_system_and_user(contract: Contract) -> None:
    shot = with_prompt(
        contract,
        system="S",
        user="U {{ review }}",
        examples=(
            ExampleMessage(role="user", content="Review: ok"),
            ExampleMessage(role="assistant", content='{"sentiment": "positive"}'),
        ),
    )
    messages = render_messages(shot, {"review": "x"})
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2].content == '{"sentiment": "positive"}'
    assert messages[3].content == "U x"


def test_no_system_prompt_means_no_system_message(contract: Contract) -> None:
    bare = with_prompt(contract, user="{{ review }}")
    assert [m.role for m in render_messages(bare, {"review": "x"})] == ["user"]


def test_missing_variable_names_template_and_variable(contract: Contract) -> None:
    with pytest.raises(RenderError) as info:
        render_messages(contract, {"text": "wrong key"})
    error = info.value
    assert (error.template, error.variable, error.field) == ("user", "review", "prompt.user")
    assert (
        str(error) == "contract sentiment: prompt.user: undefined variable 'review' "
        "('review' is undefined)"
    )


def test_missing_variable_in_system_prompt(contract: Contract) -> None:
    shop = with_prompt(contract, system="You work for {{ shop }}.", user="{{ review }}")
    with pytest.raises(RenderError) as info:
        render_messages(shop, {"review": "fine"})
    assert (info.value.template, info.value.variable) == ("system", "shop")


def test_missing_nested_attribute_is_an_error_not_empty_text(contract: Contract) -> None:
    nested = with_prompt(contract, user="Product: {{ product.name }}")
    with pytest.raises(RenderError) as info:
        render_messages(nested, {"product": {"title": "Mug"}})
    assert info.value.variable == "name"
    assert "has no attribute 'name'" in str(info.value)


def test_undefined_used_in_a_loop_or_condition_is_an_error(contract: Contract) -> None:
    looped = with_prompt(contract, user="{% for t in tags %}{{ t }}{% endfor %}")
    with pytest.raises(RenderError, match="undefined variable 'tags'"):
        render_messages(looped, {})


def test_sandbox_refuses_unsafe_access(contract: Contract) -> None:
    unsafe = with_prompt(contract, user="{{ review.__class__.__mro__ }}")
    with pytest.raises(RenderError, match="refused by the sandbox"):
        render_messages(unsafe, {"review": "x"})
    mutate = with_prompt(contract, user="{{ tags.append(1) }}")
    tags: list[int] = []
    with pytest.raises(RenderError, match="refused by the sandbox"):
        render_messages(mutate, {"tags": tags})
    assert tags == []


def test_runtime_type_error_is_a_render_error(contract: Contract) -> None:
    adding = with_prompt(contract, user="{{ review + 1 }}")
    with pytest.raises(RenderError, match="TypeError"):
        render_messages(adding, {"review": "x"})


def test_templates_are_compiled_once_per_contract(
    contract_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    original = render_module._compile

    def counting(contract: Contract) -> Any:
        calls.append(contract.name)
        return original(contract)

    monkeypatch.setattr(render_module, "_compile", counting)
    fresh = contract_from_data(contract_data)
    for review in ("a", "b", "c"):
        render_messages(fresh, {"review": review})
    assert calls == ["sentiment"]
    changed = fresh.model_copy(update={"prompt": Prompt(user="Changed {{ review }}")})
    assert render_messages(changed, {"review": "d"})[-1].content == "Changed d"
    assert calls == ["sentiment", "sentiment"]


def test_build_request_takes_sampling_and_schema(contract: Contract) -> None:
    request = build_request(contract, {"review": "ok"}, timeout=12.5, labels={"job": "j1"})
    assert request.temperature == 0.0
    assert request.max_tokens == 50
    assert request.timeout == 12.5
    assert request.output_schema == contract.output_schema
    assert request.labels == {"contract": "sentiment", "contract_version": "1", "job": "j1"}
    assert request.messages == render_messages(contract, {"review": "ok"})


def test_build_request_params_override_sampling(contract: Contract) -> None:
    request = build_request(
        contract, {"review": "ok"}, params={"temperature": 0.7, "max_tokens": 10, "other": 1}
    )
    assert (request.temperature, request.max_tokens) == (0.7, 10)


def test_a_part_without_jinja_syntax_is_rendered_once_and_says_the_same(
    contract: Contract, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixed text (no Jinja syntax) is rendered at compile time, as Jinja renders it (its one
    trailing newline dropped); a part with syntax is still rendered for each input."""
    fixed = with_prompt(
        contract,
        system="Fixed text, {braces} and % kept.\n",
        examples=[ExampleMessage(role="user", content="Say {{ 'hi' }}")],
        user="Review: {{ review }}",
    )
    first = render_messages(fixed, {"review": "one"})
    renders: list[str] = []
    real = render_module._ENV.from_string("").__class__.render

    def counted(self: Any, *args: Any, **kwargs: Any) -> str:
        renders.append(self.name or "?")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(render_module._ENV.from_string("").__class__, "render", counted)
    second = render_messages(fixed, {"review": "two"})
    assert [m.content for m in first] == [
        "Fixed text, {braces} and % kept.",
        "Say hi",
        "Review: one",
    ]
    assert [m.content for m in second] == [
        "Fixed text, {braces} and % kept.",
        "Say hi",
        "Review: two",
    ]
    assert len(renders) == 2  # the example and the user part; the system text not again
