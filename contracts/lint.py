"""Warnings a contract earns: settings that make a certification a matter of luck.

Two, each naming the contract field to change and how (issue 32):

- **Agreement on free text under ``min_agreement: 1.0``.** Every run must then write the same
  words. At temperature 0 a provider need not (llama.cpp's server gave byte-identical requests
  different answers), so a pass recorded today can be a fail tomorrow with nothing changed.
  Found from the contract alone: an `agree_on` path (the whole output when it is empty) whose
  output schema is a free string (no ``enum``, ``const``, ``pattern`` or ``format``).
- **``max_tokens`` short for the answers.** Found on the provider's own answers: a run whose
  finish reason is ``length`` was cut off at `sampling.max_tokens`, and a JSON cut off never
  closes. Needs a certification's evidence (`CaseEvidence.finish_reasons`).

Pure: no store, no provider. `jobrouter contracts check` and `contracts run` print them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jobrouter.contracts.agreement import meets
from jobrouter.contracts.certification import Certification
from jobrouter.contracts.model import Contract
from jobrouter.contracts.paths import split_path

# Keywords that make a string schema a closed value rather than free text.
_CLOSED = ("enum", "const", "pattern", "format")


@dataclass(frozen=True)
class ContractWarning:
    """One warning: the contract, the field to change, what was found, and the fix."""

    contract: str
    field: str
    found: str
    fix: str
    provider: str | None = None

    def __str__(self) -> str:
        on = f" (provider {self.provider})" if self.provider else ""
        return f"warning: contract {self.contract}{on}, {self.field}: {self.found}; fix: {self.fix}"


def contract_warnings(
    contract: Contract, certifications: Iterable[Certification] = ()
) -> list[ContractWarning]:
    """The warnings of `contract`, and of the answers its `certifications` recorded (pass only
    those of this contract's current fingerprint: older answers came from another contract)."""
    warnings = free_text_agreement(contract)
    warnings += [w for c in certifications if (w := cut_off_answers(contract, c)) is not None]
    return warnings


def free_text_agreement(contract: Contract) -> list[ContractWarning]:
    """A warning when every run must agree word for word on free text."""
    sampling = contract.sampling
    if sampling.repeats < 2 or not meets(sampling.min_agreement, 1.0):
        return []
    paths = sampling.agree_on or ("$",)
    free = [path for path in paths if _free_text(_schema_at(contract.output_schema, path))]
    if not free:
        return []
    field = "sampling.agree_on" if sampling.agree_on else "sampling.agree_on (empty: the output)"
    return [
        ContractWarning(
            contract=contract.name,
            field=field,
            found=(
                f"min_agreement {sampling.min_agreement} over {sampling.repeats} runs on free "
                f"text [{', '.join(free)}]: every run must write the same words, and at "
                "temperature 0 a provider need not (identical requests, different answers)"
            ),
            fix=(
                "agree on a field the business logic reads (an enum, a number, a name, "
                "not prose), or lower sampling.min_agreement (e.g. repeats 3, min_agreement 0.67)"
            ),
        )
    ]


def cut_off_answers(contract: Contract, certification: Certification) -> ContractWarning | None:
    """A warning when the provider stopped runs at `max_tokens` (finish reason ``length``)."""
    cut = [(case.name, case.cut_off_runs, case.runs) for case in certification.cases]
    cut = [entry for entry in cut if entry[1]]
    if not cut:
        return None
    runs = sum(count for _, count, _ in cut)
    total = sum(case.runs for case in certification.cases)
    max_tokens = contract.sampling.max_tokens
    cases = ", ".join(f"{name} {count}/{of}" for name, count, of in cut)
    return ContractWarning(
        contract=contract.name,
        provider=certification.provider,
        field="sampling.max_tokens",
        found=(
            f"{runs} of {total} runs were cut off at max_tokens {max_tokens} (finish reason "
            f"length; cases {cases}): an answer cut off is rarely valid JSON"
        ),
        fix=(
            f"raise sampling.max_tokens above {max_tokens} to what the output schema's longest "
            "answer needs, or ask for a shorter answer (a maxLength in the output schema, a "
            "shorter instruction), then certify again"
        ),
    )


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The subschema a dotted `path` of the output falls under (None: the schema does not say,
    e.g. a path through a `$ref` or a combinator)."""
    node: Any = schema
    for part in split_path(path):
        if not isinstance(node, dict):
            return None
        node = node.get("items") if part.isdigit() else (node.get("properties") or {}).get(part)
    return node if isinstance(node, dict) else None


def _free_text(schema: dict[str, Any] | None) -> bool:
    """A string schema with nothing closing its values; an object whose any property is one."""
    if schema is None:
        return False
    kind = schema.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return not any(key in schema for key in _CLOSED)
    if kind == "object":
        properties = schema.get("properties") or {}
        return any(_free_text(sub) for sub in properties.values() if isinstance(sub, dict))
    return False
