"""`jobrouter config check`: every problem of a config file at once (not only the first), each
with the key it is at and, for a misspelled key or provider name, the name it probably meant;
and for a valid file, where each task would route.

`model_at` walks the pydantic models by a key path; the reference page of every key
(router/config_doc.py) walks them the same way.
"""

from __future__ import annotations

import difflib
import tomllib
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from jobrouter.config import RouterConfig, TaskConfig, WebhookConfig, error_key, unset_secrets
from jobrouter.errors import ConfigError, StoreError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Problem:
    key: str
    message: str


@dataclass(frozen=True)
class Route:
    task: str
    contract: str | None
    side_effects: str
    providers: Sequence[tuple[str, str]]  # (name, model), in order of preference
    max_attempts: int
    hedge_after: float | None


@dataclass
class CheckReport:
    file: str
    problems: list[Problem] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    database: str | None = None


def unwrap(annotation: Any) -> Any:
    """`X | None` -> X (the type a key holds when it is present)."""
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return annotation


def model_at(path: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that holds the keys at `path` ([] is the file's top level), or None."""
    current: Any = RouterConfig
    parts = list(path)
    while parts:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(str(parts.pop(0)))
        if info is None:
            return None
        current = unwrap(info.annotation)
        if get_origin(current) is dict:  # a table of named sections: the next part is a name
            if not parts:
                return None
            parts.pop(0)
            current = unwrap(get_args(current)[1])
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _problem_of(error: Any) -> Problem:
    loc = [str(part) for part in error["loc"]]
    key = error_key(error) or ""
    if error["type"] == "extra_forbidden" and loc:
        model = model_at(loc[:-1])
        known = sorted(
            name for name, info in (model.model_fields if model else {}).items() if not info.exclude
        )
        hint = suggest(loc[-1], known)
        listed = f"; known keys here: {', '.join(known)}" if known else ""
        return Problem(key, f"unknown key{hint}{listed}")
    return Problem(key or "(file)", str(error["msg"]))


def _unknown_providers(raw: dict[str, Any]) -> list[Problem]:
    providers = raw.get("providers")
    tasks = raw.get("tasks")
    if not isinstance(providers, dict) or not isinstance(tasks, dict):
        return []
    if not providers:
        return []
    problems = []
    for name, task in tasks.items():
        named = task.get("providers", []) if isinstance(task, dict) else []
        for provider in named if isinstance(named, list) else []:
            if isinstance(provider, str) and provider not in providers:
                problems.append(
                    Problem(
                        f"tasks.{name}.providers",
                        f"{provider!r} is not a [providers.X] section"
                        f"{suggest(provider, list(providers))}; configured: "
                        f"{', '.join(sorted(providers))}",
                    )
                )
    return problems


def check_config(path: Path) -> CheckReport:
    """Read, validate and build `path` as the router would, collecting every problem."""
    report = CheckReport(file=str(path))
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        report.problems.append(Problem("(file)", "no such file"))
        return report
    except tomllib.TOMLDecodeError as exc:
        report.problems.append(Problem("(file)", f"not valid TOML: {exc}"))
        return report
    naming = _unknown_providers(raw)
    try:
        config = RouterConfig.model_validate(raw)
    except ValidationError as exc:
        problems = [_problem_of(error) for error in exc.errors()]
        report.problems += naming + [p for p in problems if not (naming and p.key == "(file)")]
        report.problems += _sections_built(raw, path.resolve().parent)
        return report
    config = config.model_copy(update={"base_dir": path.resolve().parent})
    _check_built(config, report)
    report.problems += [Problem(str(e.key), e.reason) for e in unset_secrets(config.webhooks)]
    return report


def _sections_built(raw: dict[str, Any], base_dir: Path) -> list[Problem]:
    """A file that fails validation is not built, yet what only building finds (a contract
    file that is missing, a webhook secret that is not set) is reported in the same run: each
    task and webhook section that is valid on its own is checked as the router would."""
    from jobrouter.build import task_contract

    problems = []
    for name, task in _valid_sections(raw, "tasks", TaskConfig).items():
        try:
            task_contract(name, task, base_dir)
        except ConfigError as exc:
            problems.append(Problem(str(exc.key), exc.reason))
    webhooks = _valid_sections(raw, "webhooks", WebhookConfig)
    return problems + [Problem(str(e.key), e.reason) for e in unset_secrets(webhooks)]


def _valid_sections(raw: dict[str, Any], table: str, model: type[M]) -> dict[str, M]:
    """The [table.NAME] sections that validate on their own (the others' problems are among
    the file's already)."""
    sections = raw.get(table)
    valid = {}
    for name, section in sections.items() if isinstance(sections, dict) else ():
        try:
            valid[str(name)] = model.model_validate(section)
        except ValidationError:
            continue
    return valid


def _check_built(config: RouterConfig, report: CheckReport) -> None:
    from jobrouter.build import build_tasks  # contracts are loaded as the router loads them
    from jobrouter.store import check_database_url

    report.database = config.database.url
    try:
        check_database_url(config.database.url)
    except StoreError as exc:
        report.problems.append(Problem("database.url", exc.reason))
    for name in config.tasks:
        single = config.model_copy(update={"tasks": {name: config.tasks[name]}})
        try:
            runtime = build_tasks(single)[name]
        except ConfigError as exc:
            report.problems.append(Problem(exc.key or f"tasks.{name}", exc.reason))
            continue
        task = config.tasks[name]
        models = [
            (p, config.providers[p].model if p in config.providers else "(not configured)")
            for p in task.providers
        ]
        report.routes.append(
            Route(
                task=name,
                contract=runtime.contract.name if runtime.contract else None,
                side_effects="external" if runtime.policy.exclusive else "none",
                providers=models,
                max_attempts=task.max_attempts,
                hedge_after=task.hedge_after,
            )
        )
