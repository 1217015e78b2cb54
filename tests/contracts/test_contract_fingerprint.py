"""The contract fingerprint: stable across loads and processes, sensitive to behaviour only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrouter.contracts import Contract, contract_fingerprint, contract_from_data, load_contract

ROOT = Path(__file__).resolve().parents[2]


def test_same_contract_loaded_twice_has_the_same_fingerprint() -> None:
    first = load_contract("extract_product")
    second = load_contract("extract_product")
    assert first is not second
    assert contract_fingerprint(first) == contract_fingerprint(second)
    assert contract_fingerprint(first).startswith("sha256:")
    assert len(contract_fingerprint(first)) == len("sha256:") + 64


def test_fingerprint_is_the_same_in_another_process(tmp_path: Path) -> None:
    code = (
        "from jobrouter.contracts import load_contract, contract_fingerprint\n"
        "for n in ('caption', 'extract_product', 'review_sentiment'):\n"
        "    print(contract_fingerprint(load_contract(n)))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    here = [
        contract_fingerprint(load_contract(n))
        for n in ("caption", "extract_product", "review_sentiment")
    ]
    assert result.stdout.split() == here


def test_yaml_and_code_spellings_of_the_same_numbers_agree(contract_data: dict[str, Any]) -> None:
    as_ints = contract_from_data(contract_data)
    contract_data["sampling"]["temperature"] = 0.0
    as_floats = contract_from_data(yaml.safe_load(yaml.safe_dump(contract_data)))
    assert contract_fingerprint(as_ints) == contract_fingerprint(as_floats)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = data
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return change


BEHAVIOUR_CHANGES = {
    "name": _set("name", "sentiment2"),
    "version": _set("version", 2),
    "side_effects": _set("side_effects", "external"),
    "system prompt": _set("prompt.system", "Classify it."),
    "user prompt": _set("prompt.user", "Text: {{ review }}"),
    "examples": _set("prompt.examples", [{"role": "user", "content": "hi"}]),
    "input_schema": _set("input_schema", None),
    "output_schema": _set("output_schema.required", ["sentiment"]),
    "temperature": _set("sampling.temperature", 0.2),
    "max_tokens": _set("sampling.max_tokens", 51),
    "repeats": _set("sampling.repeats", 5),
    "min_agreement": _set("sampling.min_agreement", 1.0),
    "agree_on": _set("sampling.agree_on", ["reason"]),
    "checks": _set("checks.0.value", 41),
    "case input": _set("cases.0.input.review", "Great mug!"),
    "case name": _set("cases.0.name", "good2"),
    "case expect": _set("cases.1.expect.0.value", "mixed"),
    "case removed": lambda data: data["cases"].pop(),
}


@pytest.mark.parametrize("change", BEHAVIOUR_CHANGES.values(), ids=BEHAVIOUR_CHANGES.keys())
def test_every_behaviour_change_changes_the_fingerprint(
    contract: Contract, contract_data: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    change(contract_data)
    changed = contract_from_data(contract_data)
    assert contract_fingerprint(changed) != contract_fingerprint(contract)


COSMETIC_CHANGES = {
    "description": _set("description", "Something else entirely."),
    "case note": _set("cases.1.note", "a different note"),
    "check note": lambda data: data["checks"][0].update(note="why"),
    "expectation note": lambda data: data["cases"][0]["expect"][0].update(note="why"),
}


@pytest.mark.parametrize("change", COSMETIC_CHANGES.values(), ids=COSMETIC_CHANGES.keys())
def test_cosmetic_changes_keep_the_fingerprint(
    contract: Contract, contract_data: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    change(contract_data)
    changed = contract_from_data(contract_data)
    assert changed != contract
    assert contract_fingerprint(changed) == contract_fingerprint(contract)


def test_model_copy_gets_its_own_fingerprint(contract: Contract) -> None:
    before = contract_fingerprint(contract)  # memoised on `contract`
    copy = contract.model_copy(update={"version": 9})
    assert contract_fingerprint(copy) != before
    assert contract_fingerprint(contract) == before
