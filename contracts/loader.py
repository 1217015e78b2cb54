"""Load contracts from YAML files, refusing bad ones with a message that names file, field, reason.

`load_contract("caption")` looks for ``caption.yaml`` (or ``.yml``) in the given search dirs,
then in the package's ``contracts/library/``; anything that looks like a path (has a directory
separator or a ``.yaml``/``.yml`` suffix, or is a `Path`) is loaded as that file.

The YAML dialect is safe YAML with two changes that catch mistakes early: a key repeated in one
mapping is refused (PyYAML would keep the last silently), and dates stay strings (a contract is
JSON data; ``2024-05-01`` must not become a `datetime.date`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

try:
    from yaml import CSafeLoader as _LibyamlLoader
except ImportError:  # a PyYAML built without libyaml: the pure parser for both
    from yaml import SafeLoader as _LibyamlLoader  # type: ignore[assignment]

from jobrouter.contracts.errors import ContractError, ContractNotFound
from jobrouter.contracts.model import Contract

_BARE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SUFFIXES = (".yaml", ".yml")
_LIBRARY_LABEL = "contracts/library"


class _Strict(yaml.constructor.SafeConstructor):
    """Safe construction without timestamps, refusing duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _ContractYamlLoader(_Strict, yaml.SafeLoader):
    """The pure-Python parser: slower, and the one whose error messages say what was expected."""


class _FastContractYamlLoader(_Strict, _LibyamlLoader):
    """libyaml's parser, the same construction: every `Router.open` (a `jobrouter submit`)
    parses each configured contract, and the pure-Python parser took 0.2 s of it for five."""


_NO_TIMESTAMPS = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ContractYamlLoader.yaml_implicit_resolvers = _NO_TIMESTAMPS
_FastContractYamlLoader.yaml_implicit_resolvers = _NO_TIMESTAMPS


def _parse(text: str) -> Any:
    """libyaml's parse when it succeeds; on an error, the pure parser's (its messages name what
    was expected, libyaml's do not), which raises the error that is reported."""
    try:
        return yaml.load(text, Loader=_FastContractYamlLoader)
    except yaml.YAMLError:
        return yaml.load(text, Loader=_ContractYamlLoader)


def load_contract(
    name_or_path: str | os.PathLike[str],
    *,
    search_dirs: Sequence[str | os.PathLike[str]] = (),
) -> Contract:
    """Load and validate one contract; raise `ContractError` (or `ContractNotFound`) if unusable."""
    if isinstance(name_or_path, os.PathLike) or _looks_like_path(name_or_path):
        path = Path(name_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ContractError(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
        return contract_from_yaml(text, file=str(path))
    name = str(name_or_path)
    if not _BARE_NAME.match(name):
        raise ContractNotFound(f"invalid contract name {name!r}")
    label, text = _find_by_name(name, search_dirs)
    contract = contract_from_yaml(text, file=label)
    if contract.name != name:
        raise ContractError(
            f"{contract.name!r} does not match the file name {name!r}", file=label, field="name"
        )
    return contract


def library_contracts() -> tuple[str, ...]:
    """Names of the example contracts shipped in ``contracts/library/``."""
    library = resources.files("jobrouter.contracts") / "library"
    return tuple(
        sorted(
            entry.name.rsplit(".", 1)[0]
            for entry in library.iterdir()
            if entry.name.endswith(_SUFFIXES)
        )
    )


def contract_from_yaml(text: str, *, file: str = "<string>") -> Contract:
    """Parse YAML text into a validated contract; `file` labels error messages."""
    try:
        data = _parse(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        reason = exc.problem or exc.context or "invalid YAML"
        raise ContractError(f"invalid YAML: {reason}", file=file, field=where) from exc
    except yaml.YAMLError as exc:
        raise ContractError(f"invalid YAML: {exc}", file=file) from exc
    return contract_from_data(data, file=file)


def contract_from_data(data: Any, *, file: str = "<data>") -> Contract:
    """Validate already-parsed data (e.g. JSON from an API) into a contract."""
    if not isinstance(data, dict):
        raise ContractError(
            f"a contract is a mapping of keys, got {type(data).__name__}", file=file
        )
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        raise _contract_error(exc, data, file) from exc


def _looks_like_path(name: str) -> bool:
    return "/" in name or os.sep in name or name.endswith(_SUFFIXES)


def _find_by_name(name: str, search_dirs: Sequence[str | os.PathLike[str]]) -> tuple[str, str]:
    """(label for messages, text) of the first ``<name>.yaml`` or ``.yml`` found."""
    for directory in search_dirs:
        for suffix in _SUFFIXES:
            candidate = Path(directory) / f"{name}{suffix}"
            if candidate.is_file():
                return str(candidate), candidate.read_text(encoding="utf-8")
    library = resources.files("jobrouter.contracts") / "library"
    for suffix in _SUFFIXES:
        entry = library / f"{name}{suffix}"
        if entry.is_file():
            return f"{_LIBRARY_LABEL}/{name}{suffix}", entry.read_text(encoding="utf-8")
    searched = [str(Path(d)) for d in search_dirs] + [_LIBRARY_LABEL]
    raise ContractNotFound(f"no contract {name!r} in {', '.join(searched)}")


def _contract_error(exc: ValidationError, data: dict[str, Any], file: str) -> ContractError:
    errors = exc.errors()
    described = [(_field(err["loc"], data), _reason(err)) for err in errors]
    field, reason = described[0]
    if len(described) > 1:
        more = "; ".join(f"{f}: {r}" for f, r in described[1:4])
        reason = f"{reason} (+{len(described) - 1} more: {more})"
    return ContractError(reason, file=file, field=field)


def _reason(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key (not part of the contract format)"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _field(loc: tuple[int | str, ...], data: Any) -> str:
    """Dotted location; list indexes as ``[i]``; union tags that pydantic inserts are dropped."""
    out = ""
    current = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            current = current[part] if isinstance(current, list) and part < len(current) else None
            continue
        if isinstance(current, dict) and part not in current and current.get("type") == part:
            continue  # the discriminator value pydantic puts in the location
        out += f".{part}" if out else part
        current = current.get(part) if isinstance(current, dict) else None
    return out or "(root)"
