"""The contract model built in code: same validation as YAML, frozen, discriminated checks."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from jobrouter.contracts import (
    Case,
    ContainsCheck,
    Contract,
    ExampleMessage,
    MaxLengthCheck,
    NumberCheck,
    Prompt,
    RegexCheck,
    Sampling,
    contract_from_data,
)


def test_contract_built_in_code_equals_the_same_contract_from_data(
    contract_data: dict[str, Any], contract: Contract
) -> None:
    built = Contract(
        name="sentiment",
        version=1,
        description="Classify a review.",
        side_effects="none",
        prompt=Prompt(
            system="Classify the review. Answer with JSON only.", user="Review: {{ review }}"
        ),
        input_schema=contract_data["input_schema"],
        output_schema=contract_data["output_schema"],
        sampling=Sampling(max_tokens=50, agree_on=("sentiment",)),
        checks=(MaxLengthCheck(path="reason", value=40),),
        cases=(
            Case.model_validate(contract_data["cases"][0]),
            Case.model_validate(contract_data["cases"][1]),
        ),
    )
    assert built == contract


def test_defaults() -> None:
    sampling = Sampling()
    assert (sampling.temperature, sampling.repeats, sampling.min_agreement) == (0.0, 3, 0.67)
    assert sampling.agree_on == ()
    assert ContainsCheck(path="x", value="a").ignore_case is True
    assert NumberCheck(value=1).tolerance == 0.0
    assert NumberCheck(value=1).path == "$"


def test_contract_is_frozen(contract: Contract) -> None:
    with pytest.raises(ValidationError, match="frozen"):
        contract.version = 2


def test_side_effects_must_be_declared(contract_data: dict[str, Any]) -> None:
    del contract_data["side_effects"]
    with pytest.raises(ValidationError, match="side_effects"):
        Contract.model_validate(contract_data)


def test_checks_are_discriminated_on_type(contract: Contract) -> None:
    (check,) = contract.checks
    assert isinstance(check, MaxLengthCheck)
    assert check.value == 40


def test_regex_must_compile() -> None:
    with pytest.raises(ValidationError, match="invalid regular expression"):
        RegexCheck.model_validate({"type": "regex", "path": "x", "pattern": "([a-z"})


def test_callable_must_be_an_import_path(contract_data: dict[str, Any]) -> None:
    contract_data["checks"] = [{"type": "callable", "path": "x", "function": "not a path"}]
    with pytest.raises(
        ValidationError, match=re.escape("expected an import path like 'pkg.mod:func'")
    ):
        Contract.model_validate(contract_data)


def test_paths_with_empty_segments_are_refused(contract_data: dict[str, Any]) -> None:
    contract_data["sampling"]["agree_on"] = ["price..amount"]
    with pytest.raises(ValidationError, match=re.escape("invalid dotted path 'price..amount'")):
        Contract.model_validate(contract_data)


def test_example_messages_are_templates_with_user_or_assistant_role() -> None:
    with pytest.raises(ValidationError):
        ExampleMessage.model_validate({"role": "system", "content": "x"})
    with pytest.raises(ValidationError, match="template syntax error"):
        ExampleMessage(role="user", content="{% if %}")


def test_case_lookup(contract: Contract) -> None:
    assert contract.case("bad").note == "plainly negative"
    with pytest.raises(KeyError):
        contract.case("missing")


def test_input_schema_is_itself_validated(contract_data: dict[str, Any]) -> None:
    contract_data["input_schema"] = {"type": 5}
    with pytest.raises(ValidationError, match="input_schema"):
        Contract.model_validate(contract_data)


def test_contract_from_data_round_trips_model_dump(contract: Contract) -> None:
    again = contract_from_data(contract.model_dump(mode="json"))
    assert again == contract
