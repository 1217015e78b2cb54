"""Shared fixtures for the contract tests: a small valid contract, as data and as a model."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobrouter.contracts import Contract, contract_from_data

_CONTRACT: dict[str, Any] = {
    "name": "sentiment",
    "version": 1,
    "description": "Classify a review.",
    "side_effects": "none",
    "prompt": {
        "system": "Classify the review. Answer with JSON only.",
        "user": "Review: {{ review }}",
    },
    "input_schema": {
        "type": "object",
        "required": ["review"],
        "properties": {"review": {"type": "string"}},
    },
    "output_schema": {
        "type": "object",
        "required": ["sentiment", "reason"],
        "properties": {
            "sentiment": {"enum": ["positive", "negative", "mixed"]},
            "reason": {"type": "string"},
        },
    },
    "sampling": {"max_tokens": 50, "repeats": 3, "agree_on": ["sentiment"]},
    "checks": [{"type": "max_length", "path": "reason", "value": 40}],
    "cases": [
        {
            "name": "good",
            "input": {"review": "Great mug, love it."},
            "expect": [{"type": "equals", "path": "sentiment", "value": "positive"}],
        },
        {
            "name": "bad",
            "input": {"review": "Broke on day one."},
            "expect": [{"type": "equals", "path": "sentiment", "value": "negative"}],
            "note": "plainly negative",
        },
    ],
}


@pytest.fixture
def contract_data() -> dict[str, Any]:
    """A fresh, mutable copy of a valid contract as plain data."""
    return copy.deepcopy(_CONTRACT)


@pytest.fixture
def contract(contract_data: dict[str, Any]) -> Contract:
    """The same contract as a validated model."""
    return contract_from_data(contract_data, file="sentiment.yaml")
