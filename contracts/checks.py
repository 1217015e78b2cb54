"""Judge one output: against the contract's JSON Schema, then against check specs.

`run_checks` returns a `CheckFailure` per failed spec, each saying which check, which path, what
was found and what was expected; an empty list means every check passed. A path that does not
exist fails every check kind (``found <missing>``). `validate_output` / `validate_input` return
schema error messages (Draft 2020-12, formats checked). `check_output` is both, as the router
uses it on a live answer: any message means the answer is unusable for the contract.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict

from jobrouter.contracts.memo import derived
from jobrouter.contracts.model import (
    CallableCheck,
    CheckSpec,
    ContainsCheck,
    Contract,
    EqualsCheck,
    IsNullCheck,
    MaxLengthCheck,
    NotNullCheck,
    NumberCheck,
    OneOfCheck,
    RegexCheck,
)
from jobrouter.contracts.paths import MISSING, resolve, show
from jobrouter.providers.simple_schema import compile_simple as simple


class CheckFailure(BaseModel):
    """One failed check: the kind, the path, what was found and what was expected."""

    model_config = ConfigDict(frozen=True)

    check: str
    path: str
    found: str
    expected: str
    note: str = ""

    def __str__(self) -> str:
        note = f" ({self.note})" if self.note else ""
        return f"{self.check} at {self.path}: found {self.found}, expected {self.expected}{note}"


def json_equal(a: Any, b: Any, *, ignore_case: bool = False) -> bool:
    """Equality of JSON values: numbers by value (1 == 1.0), bools never equal to numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold() if ignore_case else a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(
            json_equal(a[k], b[k], ignore_case=ignore_case) for k in a
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            json_equal(x, y, ignore_case=ignore_case) for x, y in zip(a, b, strict=True)
        )
    return a is None and b is None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equals(spec: EqualsCheck, found: Any) -> bool:
    return json_equal(found, spec.value)


def _contains(spec: ContainsCheck, found: Any) -> bool:
    if isinstance(found, str) and isinstance(spec.value, str):
        if spec.ignore_case:
            return spec.value.casefold() in found.casefold()
        return spec.value in found
    if isinstance(found, list):
        return any(json_equal(item, spec.value, ignore_case=spec.ignore_case) for item in found)
    return False


def _one_of(spec: OneOfCheck, found: Any) -> bool:
    return any(json_equal(found, value, ignore_case=spec.ignore_case) for value in spec.values)


def _max_length(spec: MaxLengthCheck, found: Any) -> bool:
    return isinstance(found, str | list) and len(found) <= spec.value


def _number(spec: NumberCheck, found: Any) -> bool:
    if not _is_number(found) or not math.isfinite(found):
        return False
    slack = 1e-9 * max(1.0, abs(spec.value))  # so 12.91 is within 0.01 of 12.90 despite floats
    return bool(abs(found - spec.value) <= spec.tolerance + slack)


def _regex(spec: RegexCheck, found: Any) -> bool:
    flags = re.IGNORECASE if spec.ignore_case else 0
    return isinstance(found, str) and re.search(spec.pattern, found, flags) is not None


@lru_cache(maxsize=256)
def _import_callable(path: str) -> Callable[[Any], Any]:
    module_name, _, attribute = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for name in attribute.split("."):
        target = getattr(target, name)
    if not callable(target):
        raise TypeError(f"{path} is not callable")
    return target  # type: ignore[no-any-return]


def _callable(spec: CallableCheck, found: Any) -> bool:
    return _import_callable(spec.function)(found) is True


def _is_null(spec: IsNullCheck, found: Any) -> bool:
    return found is None


def _not_null(spec: NotNullCheck, found: Any) -> bool:
    return found is not None and found is not MISSING


def _expected(spec: CheckSpec) -> str:
    match spec:
        case EqualsCheck(value=value):
            return show(value)
        case ContainsCheck(value=value, ignore_case=ignore_case):
            return f"to contain {show(value)}" + (" (any case)" if ignore_case else "")
        case OneOfCheck(values=values):
            return "one of " + ", ".join(show(v) for v in values)
        case MaxLengthCheck(value=value):
            return f"a string or list of length <= {value}"
        case NumberCheck(value=value, tolerance=tolerance):
            return f"a number {show(value)} ± {show(tolerance)}"
        case RegexCheck(pattern=pattern):
            return f"a string matching /{pattern}/"
        case CallableCheck(function=function):
            return f"{function}(value) to return True"
        case IsNullCheck():
            return "null"
        case NotNullCheck():
            return "a non-null value"
    raise AssertionError(f"unknown check {spec!r}")  # pragma: no cover - the union is closed


_PREDICATES: dict[type[Any], Callable[[Any, Any], bool]] = {
    EqualsCheck: _equals,
    ContainsCheck: _contains,
    OneOfCheck: _one_of,
    MaxLengthCheck: _max_length,
    NumberCheck: _number,
    RegexCheck: _regex,
    CallableCheck: _callable,
    IsNullCheck: _is_null,
    NotNullCheck: _not_null,
}


def _found_text(found: Any) -> str:
    if isinstance(found, str | list):
        return f"{show(found)} (length {len(found)})"
    return show(found)


def run_check(spec: CheckSpec, output: Any) -> CheckFailure | None:
    """None if `spec` passes on `output`, else the failure."""
    found = resolve(output, spec.path)
    found_text = _found_text(found) if isinstance(spec, MaxLengthCheck) else show(found)
    if found is not MISSING:
        try:
            if _PREDICATES[type(spec)](spec, found):
                return None
        except Exception as exc:  # a callable check's own error is a failure, not a crash
            found_text = f"{found_text} (raised {type(exc).__name__}: {exc})"
    return CheckFailure(
        check=spec.type,
        path=spec.path or "$",
        found=found_text,
        expected=_expected(spec),
        note=spec.note,
    )


def run_checks(specs: Iterable[CheckSpec], output: Any) -> list[CheckFailure]:
    """The failures of every spec in `specs` on `output`, in order (empty when all pass)."""
    return [failure for spec in specs if (failure := run_check(spec, output)) is not None]


def _validator(schema: Mapping[str, Any]) -> Any:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _schema_errors(validator: Any, instance: Any) -> list[str]:
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.path])
    return [f"{'.'.join(str(p) for p in error.path) or '$'}: {error.message}" for error in errors]


def validate_output(contract: Contract, output: Any) -> list[str]:
    """Schema errors of `output` against `contract.output_schema` (empty when valid)."""
    quick = derived(contract, "schema.output.simple", lambda: simple(contract.output_schema))
    if quick is not None and quick(output):
        return []  # a yes of the plain-keyword check is jsonschema's (providers/simple_schema.py)
    validator = derived(contract, "schema.output", lambda: _validator(contract.output_schema))
    return _schema_errors(validator, output)


def validate_input(contract: Contract, input: Any) -> list[str]:
    """Schema errors of a job input against `contract.input_schema` (empty when valid or none)."""
    schema = contract.input_schema
    if schema is None:
        return []
    quick = derived(contract, "schema.input.simple", lambda: simple(schema))
    if quick is not None and quick(input):
        return []
    validator = derived(contract, "schema.input", lambda: _validator(schema))
    return _schema_errors(validator, input)


def check_output(contract: Contract, output: Any, *, extra: Sequence[CheckSpec] = ()) -> list[str]:
    """Schema errors, or else the failures of the contract's checks (and `extra`), as text."""
    errors = validate_output(contract, output)
    if errors:
        return [f"schema: {error}" for error in errors]
    return [str(failure) for failure in run_checks((*contract.checks, *extra), output)]
