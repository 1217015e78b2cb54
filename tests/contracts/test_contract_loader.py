"""Loading contracts: name resolution, and refusals that name the file, the field and the reason."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from jobrouter.contracts import (
    Contract,
    ContractError,
    ContractNotFound,
    contract_from_data,
    contract_from_yaml,
    library_contracts,
    load_contract,
    render_messages,
    validate_input,
)


def write(tmp_path: Path, data: dict[str, Any], name: str = "sentiment.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def refusal(tmp_path: Path, data: dict[str, Any]) -> ContractError:
    path = write(tmp_path, data)
    with pytest.raises(ContractError) as info:
        load_contract(path)
    return info.value


def test_loads_a_path_and_a_bare_name_from_search_dirs(
    tmp_path: Path, contract_data: dict[str, Any]
) -> None:
    path = write(tmp_path, contract_data)
    by_path = load_contract(path)
    by_str = load_contract(str(path))
    by_name = load_contract("sentiment", search_dirs=[tmp_path])
    assert by_path == by_str == by_name
    assert by_name.cases[1].note == "plainly negative"


def test_search_dirs_come_before_the_library(tmp_path: Path, contract_data: dict[str, Any]) -> None:
    contract_data["name"] = "caption"
    write(tmp_path, contract_data, "caption.yaml")
    assert load_contract("caption", search_dirs=[tmp_path]).description == "Classify a review."
    assert load_contract("caption").description != "Classify a review."


def test_unknown_name_lists_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ContractNotFound, match=r"no contract 'nope' in .*contracts/library"):
        load_contract("nope", search_dirs=[tmp_path])
    with pytest.raises(ContractNotFound, match="invalid contract name"):
        load_contract("..")


def test_name_must_match_the_file_it_was_found_by(
    tmp_path: Path, contract_data: dict[str, Any]
) -> None:
    write(tmp_path, contract_data, "other.yaml")
    with pytest.raises(ContractError) as info:
        load_contract("other", search_dirs=[tmp_path])
    assert str(info.value) == (
        f"{tmp_path / 'other.yaml'}: name: 'sentiment' does not match the file name 'other'"
    )


def test_bad_value_names_file_field_and_reason(
    tmp_path: Path, contract_data: dict[str, Any]
) -> None:
    contract_data["sampling"]["min_agreement"] = 1.5
    error = refusal(tmp_path, contract_data)
    assert error.file == str(tmp_path / "sentiment.yaml")
    assert error.field == "sampling.min_agreement"
    assert error.reason == "Input should be less than or equal to 1"
    assert str(error) == (
        f"{tmp_path / 'sentiment.yaml'}: sampling.min_agreement: "
        "Input should be less than or equal to 1"
    )


def test_library_file_is_named_relative_to_the_package(
    tmp_path: Path, contract_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "library").mkdir()
    contract_data["version"] = "one"
    write(tmp_path / "library", contract_data)
    monkeypatch.setattr(
        "jobrouter.contracts.loader.resources", SimpleNamespace(files=lambda _: tmp_path)
    )
    with pytest.raises(ContractError) as info:
        load_contract("sentiment")
    assert str(info.value) == (
        "contracts/library/sentiment.yaml: version: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


def test_unknown_keys_are_refused_at_every_level(
    tmp_path: Path, contract_data: dict[str, Any]
) -> None:
    contract_data["sampling"]["repeatz"] = 5
    error = refusal(tmp_path, contract_data)
    assert error.field == "sampling.repeatz"
    assert "unknown key" in error.reason
    top = dict(contract_data)
    del top["sampling"]["repeatz"]
    top["ouput_schema"] = {}
    assert refusal(tmp_path, top).field == "ouput_schema"


def test_error_in_a_case_expectation_drops_the_union_tag(
    tmp_path: Path, contract_data: dict[str, Any]
) -> None:
    contract_data["cases"][1]["expect"] = [
        {"type": "number", "path": "x", "value": 1, "tolerance": -1}
    ]
    error = refusal(tmp_path, contract_data)
    assert error.field == "cases[1].expect[0].tolerance"
    assert error.reason == "Input should be greater than or equal to 0"


def test_unknown_check_type_is_named(tmp_path: Path, contract_data: dict[str, Any]) -> None:
    contract_data["checks"] = [{"type": "equal", "path": "x", "value": 1}]
    error = refusal(tmp_path, contract_data)
    assert error.field == "checks[0]"
    assert "'equal'" in error.reason and "'equals'" in error.reason


def test_several_errors_are_all_mentioned(tmp_path: Path, contract_data: dict[str, Any]) -> None:
    contract_data["version"] = 0
    contract_data["side_effects"] = "sometimes"
    error = refusal(tmp_path, contract_data)
    assert error.field == "version"
    assert "(+1 more: side_effects: Input should be 'none' or 'external')" in error.reason


def test_invalid_output_schema_is_refused(tmp_path: Path, contract_data: dict[str, Any]) -> None:
    contract_data["output_schema"] = {"type": "object", "properties": {"a": {"type": "strng"}}}
    error = refusal(tmp_path, contract_data)
    assert error.field == "output_schema"
    assert error.reason.startswith("not a valid Draft 2020-12 schema at properties.a.type:")


def test_template_syntax_error_names_template_and_line(
    tmp_path: Path, contract_data: dict[str, Any]
) -> None:
    contract_data["prompt"]["user"] = "Review:\n{{ review }"
    error = refusal(tmp_path, contract_data)
    assert error.field == "prompt.user"
    assert error.reason.startswith("template syntax error at line 2:")


def test_case_input_must_match_input_schema(tmp_path: Path, contract_data: dict[str, Any]) -> None:
    contract_data["cases"][0]["input"] = {"reveiw": "typo"}
    error = refusal(tmp_path, contract_data)
    assert error.field == "cases"
    assert "case 'good': input does not match input_schema: 'review' is a required" in error.reason


def test_yaml_syntax_error_names_the_line() -> None:
    text = "name: x\nversion: 1\nprompt:\n  user: [unclosed\nside_effects: none\n"
    with pytest.raises(ContractError) as info:
        contract_from_yaml(text, file="broken.yaml")
    assert info.value.file == "broken.yaml"
    assert info.value.field is not None and info.value.field.startswith("line 5,")
    assert str(info.value) == (
        "broken.yaml: line 5, column 13: invalid YAML: expected ',' or ']', but got ':'"
    )


def test_duplicate_keys_are_refused_with_their_line() -> None:
    text = "name: x\nversion: 1\nversion: 2\n"
    with pytest.raises(ContractError) as info:
        contract_from_yaml(text, file="dup.yaml")
    assert str(info.value) == "dup.yaml: line 3, column 1: invalid YAML: duplicate key 'version'"


def test_dates_stay_strings(contract_data: dict[str, Any]) -> None:
    text = yaml.safe_dump(contract_data).replace("Great mug, love it.", "2024-05-01")
    contract = contract_from_yaml(text)
    assert contract.case("good").input == {"review": "2024-05-01"}


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(
        ContractError, match=r"^x\.yaml: a contract is a mapping of keys, got list$"
    ):
        contract_from_yaml("- a\n- b\n", file="x.yaml")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match=r"missing\.yaml: cannot read"):
        load_contract(tmp_path / "missing.yaml")


def test_duplicate_case_names_are_refused(contract_data: dict[str, Any]) -> None:
    contract_data["cases"][1]["name"] = "good"
    with pytest.raises(ContractError, match="cases: duplicate case name 'good'"):
        contract_from_data(contract_data, file="c.yaml")


def test_library_contains_the_examples() -> None:
    assert {"caption", "extract_product", "review_sentiment"} <= set(library_contracts())


@pytest.mark.parametrize("name", ["caption", "extract_product", "review_sentiment"])
def test_every_library_contract_loads_and_every_case_renders(name: str) -> None:
    contract = load_contract(name)
    assert contract.name == name
    for case in contract.cases:
        assert validate_input(contract, case.input) == []
        messages = render_messages(contract, case.input)
        expected_roles = ["user"] if contract.prompt.system is None else ["system", "user"]
        assert [m.role for m in messages] == expected_roles
        value = next(iter(case.input.values()))
        shown = value["name"] if isinstance(value, dict) else value
        assert isinstance(shown, str) and shown in messages[-1].content


@pytest.mark.parametrize("name", ["extract_product", "review_sentiment"])
def test_example_contracts_have_eight_golden_cases_with_expectations(name: str) -> None:
    contract: Contract = load_contract(name)
    assert len(contract.cases) >= 8
    assert all(case.expect for case in contract.cases)
    assert contract.side_effects == "none"
    # the instructions must reach models whose chat format drops system messages (gemma)
    assert contract.prompt.system is None
    assert "JSON object only" in contract.prompt.user


def test_extract_product_cases_cover_the_edge_cases() -> None:
    contract = load_contract("extract_product")
    no_price = contract.case("no_price")
    assert {(e.type, e.path) for e in no_price.expect} >= {
        ("is_null", "price"),
        ("is_null", "currency"),
    }
    was_now = contract.case("was_now_sale")
    (price,) = [e for e in was_now.expect if e.path == "price"]
    assert price.type == "number" and price.value == pytest.approx(34.30) and price.note


def test_libyaml_parses_every_library_contract_as_the_pure_parser_does() -> None:
    """Contracts are parsed with libyaml (0.2 s less per `jobrouter submit`); the data, so
    every contract's fingerprint and its certifications, is what the pure parser makes.
    Mutant seen failing: the fast loader without the timestamp-free resolvers."""
    from jobrouter.contracts import loader

    library = Path(loader.__file__).with_name("library")
    texts = [path.read_text("utf-8") for path in sorted(library.glob("*.yaml"))]
    texts.append("when: 2024-05-01\nat: 2024-05-01T10:00:00Z\n")
    assert len(texts) > 1
    for text in texts:
        fast = yaml.load(text, Loader=loader._FastContractYamlLoader)
        assert fast == yaml.load(text, Loader=loader._ContractYamlLoader)
