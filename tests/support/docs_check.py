"""Holds what the docs name (tests/support/docs_names.py) against the code: the CLI's click tree,
the header names the product's source reads or sends, the pydantic config model, the exit code
table and the FastAPI app's routes. Each `check_*` returns problems, one line each
("README.md:99: header Idempotency-Replayed: ..."); no problems is the pass.

The few names below that are not checked say why; every other name the docs write is held
against the code.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import typer.main
from pydantic import BaseModel

from jobrouter.config import RouterConfig
from jobrouter.config_check import unwrap
from tests.support import docs_names
from tests.support.docs_names import Doc

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("router", "providers", "contracts")
# Modules of the libraries `jobrouter serve` runs on that read headers for it: uvicorn reads
# X-Forwarded-Proto / -For (docs/console.md, behind a reverse proxy).
LIBRARY_HEADER_MODULES = ("uvicorn.middleware.proxy_headers",)
# Words the header pattern matches that are not headers.
NOT_HEADERS = {"Zero-Clause": "htmx's licence, Zero-Clause BSD (docs/console.md)"}
# Flags of other programs that the docs name in inline code; not jobrouter's, not checked here.
OTHER_PROGRAMS_FLAGS = {
    "--chat_format": "llama_cpp.server",
    "--n_threads": "llama_cpp.server",
    "--n_threads_batch": "llama_cpp.server",
    "--n_ctx": "llama_cpp.server",
    "-x": "pytest",
    "-m": "pytest",
    "--timeout": "pytest-timeout",
    "--durations": "pytest",
}
# Bench flags (`python -m tests.bench --statements`) are checked against the bench's source,
# and those of the mutation runner (`python -m tests.mutation --mutmut`) against its own.
BENCH_SOURCE = REPO / "tests" / "bench"
MUTATION_SOURCE = REPO / "tests" / "mutation.py"
# Bracketed inline code that is not a jobrouter.toml section.
NOT_SECTIONS = {"redacted": "the scrubber's marker for a removed secret"}
# The routes in this doc are llama.cpp's server's (GET /v1/models), not jobrouter's.
OTHER_SERVERS_DOCS = frozenset({"docs/local-provider.md"})
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "at",
        "by",
        "for",
        "if",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "to",
        "was",
        "when",
        "with",
        "what",
        "its",
        "no",
        "not",
        "may",
    ]
)


def load_docs(root: Path = REPO) -> list[Doc]:
    return [docs_names.parse(path, root) for path in docs_names.doc_files(root)]


# --- CLI ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    flags: frozenset[str]
    valued: frozenset[str]  # the flags that take a value (`--task caption`)
    subcommands: dict[str, Command]
    invocable: bool  # a group with a callback of its own (`jobrouter outbox`) runs alone


def cli_tree() -> Command:
    """The real command tree of `jobrouter`, from typer's click command."""
    from jobrouter.cli import app

    return _command(typer.main.get_command(app), ())


def _command(cmd: Any, path: tuple[str, ...]) -> Command:
    options = [p for p in cmd.params if p.param_type_name == "option"]
    subs = getattr(cmd, "commands", {})
    return Command(
        path,
        frozenset({"--help"} | {o for p in options for o in p.opts + p.secondary_opts}),
        frozenset(o for p in options if not p.is_flag and not p.count for o in p.opts),
        {name: _command(sub, (*path, name)) for name, sub in subs.items()},
        invocable=not subs or bool(getattr(cmd, "invoke_without_command", False)),
    )


def every_command(root: Command) -> Iterable[Command]:
    yield root
    for sub in root.subcommands.values():
        yield from every_command(sub)


def resolve_command(
    root: Command, words: Sequence[str]
) -> tuple[Command, list[tuple[Command, str]], list[str]]:
    """(the command the words name, each flag written with the command it follows, problems)."""
    current, flags, problems = root, [], []
    value_next = False
    for word in words:
        if value_next:
            value_next = False
        elif word.startswith("-"):
            flag = word.split("=")[0]
            flags.append((current, flag))
            value_next = flag in current.valued and "=" not in word
        elif word in current.subcommands:
            current = current.subcommands[word]
        elif current.subcommands and not current.invocable:
            problems.append(f"no command {' '.join(('jobrouter', *current.path, word))!r}")
            break
        # else: a positional argument (JOB_ID, a file)
    return current, flags, problems


def check_cli(
    docs: Sequence[Doc], root: Command | None = None
) -> tuple[list[str], set[tuple[str, ...]]]:
    """Problems, and the command paths the docs name (to find undocumented commands)."""
    root = root or cli_tree()
    groups = frozenset(n for n, c in root.subcommands.items() if c.subcommands)
    problems: list[str] = []
    named: set[tuple[str, ...]] = set()
    for doc in docs:
        for line in docs_names.cli_mentions(doc, frozenset(root.subcommands), groups):
            command, flags, wrong = resolve_command(root, line.words)
            problems += [f"{line.at()}: `{line.text}`: {w}" for w in wrong]
            if wrong:
                continue
            named.add(command.path)
            for owner, flag in [*flags, *((command, f) for f in line.comment_flags)]:
                if flag not in owner.flags:
                    where = " ".join(("jobrouter", *owner.path))
                    problems.append(f"{line.at()}: `{line.text}`: {where} has no {flag}")
    return problems, named


def check_standalone_flags(docs: Sequence[Doc], root: Command | None = None) -> list[str]:
    """A flag written alone (`--grace`) must be a flag of some jobrouter command."""
    root = root or cli_tree()
    known = set().union(*(c.flags for c in every_command(root)))
    bench = "\n".join(p.read_text("utf-8") for p in sorted(BENCH_SOURCE.glob("*.py")))
    bench += MUTATION_SOURCE.read_text("utf-8")
    problems = []
    for doc in docs:
        for flag in docs_names.standalone_flags(doc):
            if flag.text in known or flag.text in OTHER_PROGRAMS_FLAGS:
                continue
            if f'"{flag.text}"' in bench:  # python -m tests.bench --statements (or tests.mutation)
                continue
            problems.append(f"{flag.at()}: flag {flag.text}: no jobrouter command has it")
    return problems


def check_flag_claims(docs: Sequence[Doc], root: Command | None = None) -> list[str]:
    """ "`--json` ... on `submit`, `show` and `outbox`": each named command has the flag;
    "Every command takes `--config PATH`": every command that runs has it."""
    root = root or cli_tree()
    problems = []
    for doc in docs:
        for claim in docs_names.flag_claims(doc):
            if claim.commands:
                commands = [resolve_command(root, name.split()) for name in claim.commands]
                lacking = [" ".join(c.path) for c, _, wrong in commands if wrong or c is root]
                lacking += [" ".join(c.path) for c, _, _ in commands if claim.flag not in c.flags]
            else:
                every = [c for c in every_command(root) if c.path and c.invocable]
                lacking = [" ".join(c.path) for c in every if claim.flag not in c.flags]
            if lacking:
                problems.append(
                    f"{claim.at()}: says {claim.flag} is taken by "
                    f"{'these commands' if claim.commands else 'every command'}, "
                    f"but not by: {', '.join(sorted(set(lacking)))}"
                )
    return problems


def undocumented_commands(named: set[tuple[str, ...]], root: Command | None = None) -> list[str]:
    root = root or cli_tree()
    return sorted(
        " ".join(("jobrouter", *c.path))
        for c in every_command(root)
        if c.path and c.invocable and c.path not in named
    )


# --- HTTP headers ---------------------------------------------------------------------------


def _literals(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            yield value


def _name(node: ast.AST) -> str:
    return getattr(node, "id", None) or getattr(node, "attr", None) or ""


def _header_places(node: ast.AST) -> list[ast.AST]:
    """Where a header name stands: a dict's key (`headers={"Retry-After": "5"}`), a comparison
    (`name == b"x-forwarded-proto"`, `"retry-after-ms" in lowered`), a lookup (`.get("...")`,
    `headers["..."]`), an ASGI pair (`(b"content-type", ...)`), `Header(alias=...)`, or a
    constant named for it (`KEY_HEADER = ...`, `SECRET_HEADERS = {...}`)."""
    if isinstance(node, ast.Dict):
        return [key for key in node.keys if key is not None]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.Subscript):
        return [node.slice]
    if isinstance(node, ast.Tuple) and len(node.elts) == 2:
        first = node.elts[0]
        return [first] if isinstance(first, ast.Constant) and isinstance(first.value, bytes) else []
    if isinstance(node, ast.Call):
        if _name(node.func) in ("get", "getheader", "getlist", "pop"):
            return node.args[:1]
        if _name(node.func) == "Header":
            return [kw.value for kw in node.keywords if kw.arg == "alias"]
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any("HEADER" in _name(target) for target in targets):  # its names, not values
            inside = list(ast.walk(node.value))
            values = {id(v) for n in inside if isinstance(n, ast.Dict) for v in n.values}
            return [n for n in inside if id(n) not in values]
    return []


def header_constants(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        for place in _header_places(node):
            if isinstance(place, ast.Constant) and isinstance(place.value, str | bytes):
                value = place.value
                yield value.decode("latin-1") if isinstance(value, bytes) else value


@functools.cache
def known_headers() -> frozenset[str]:
    """Header names the product reads, sends or scrubs: the string constants of its source that
    stand where a header name stands (`_header_places`) and have a header's shape, plus those
    the HTTP library it serves with reads for it. Lower case: names are case-insensitive."""
    files = [p for d in SOURCE_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    for module in LIBRARY_HEADER_MODULES:
        spec = importlib.util.find_spec(module)
        assert spec and spec.origin, module
        files.append(Path(spec.origin))
    shape = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")
    found = set()
    for file in files:
        for value in header_constants(ast.parse(file.read_text("utf-8"))):
            if shape.fullmatch(value) and ("-" in value or value.lower() in _ONE_WORD_HEADERS):
                found.add(value.lower())
    return frozenset(found)


# One-word header names (RFC 9110 and the cookie RFC) that a constant may be; other one-word
# constants ("caption") are not header names.
_ONE_WORD_HEADERS = frozenset({"authorization", "cookie", "host", "origin", "accept", "location"})


def check_headers(docs: Sequence[Doc], known: frozenset[str] | None = None) -> list[str]:
    known = known if known is not None else known_headers()
    problems = []
    for doc in docs:
        for header in docs_names.header_mentions(doc):
            if header.text in NOT_HEADERS or header.text.lower() in known:
                continue
            problems.append(
                f"{header.at()}: header {header.text}: the code neither reads nor sends it"
            )
    return problems


# --- configuration --------------------------------------------------------------------------


def _key_problem(path: Sequence[str], value: Any = None) -> str | None:
    """Why `path` (with the TOML value found there, if any) is not a key of RouterConfig."""
    current: Any = RouterConfig
    for depth, part in enumerate(path):
        here = ".".join(path[: depth + 1])
        current = unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if part not in current.model_fields or current.model_fields[part].exclude:
                return f"no key {here}"
            current = current.model_fields[part].annotation
        elif get_origin(current) is dict:
            key_type, current = get_args(current)
            if get_origin(key_type) is Literal and part not in get_args(key_type):
                return f"no key {here} (one of {', '.join(map(str, get_args(key_type)))})"
        else:
            return f"no key {here}: {'.'.join(path[:depth])} is a value"
    if isinstance(value, dict):
        for key, inner in value.items():
            problem = _key_problem([*path, key], inner)
            if problem:
                return problem
    return None


def _table_paths(table: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterable[tuple[str, ...]]:
    for key, value in table.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _table_paths(value, (*prefix, key))


def check_config(docs: Sequence[Doc]) -> list[str]:
    problems = []
    for doc in docs:
        for block in docs_names.toml_blocks(doc):
            if block.error:
                problems.append(f"{block.at()}: TOML block does not parse: {block.error}")
            for path in _table_paths(block.table):
                problem = _key_problem(path)
                if problem:
                    problems.append(f"{block.at()}: TOML block: {problem}")
        for mention, path in docs_names.section_mentions(doc):
            if path[0] in NOT_SECTIONS or _pyproject_section(path):
                continue
            problem = _key_problem(path)
            if problem:
                problems.append(f"{mention.at()}: `{mention.text}`: {problem}")
    return sorted(set(problems))


def _pyproject_section(path: Sequence[str]) -> bool:
    """`[tool.mutmut]` (pyproject.toml's) and `[local]` (an extra: `pip install '.[local]'`)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    return path[0] == "tool" or (len(path) == 1 and path[0] in extras)


# --- exit codes -----------------------------------------------------------------------------


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP_WORDS}


def check_exit_codes(docs: Sequence[Doc], table: type[IntEnum] | None = None) -> list[str]:
    """Every exit code named is in the table; in a list of codes, the meaning the doc gives
    each shares more words with that code's name and comment in router/exits.py than with any
    other code's."""
    from jobrouter.exits import Exit

    codes: type[IntEnum] = table or Exit
    values = {member.value: member for member in codes}
    meanings = _exit_meanings(codes)
    problems = []
    for doc in docs:
        for mention in docs_names.exit_mentions(doc):
            if int(mention.text) not in values:
                problems.append(f"{mention.at()}: exit {mention.text}: not in router/exits.py")
        for mention, meaning in docs_names.exit_code_lists(doc):
            code = int(mention.text)
            if code not in values:
                problems.append(f"{mention.at()}: exit code {code}: not in router/exits.py")
                continue
            said = _words(meaning)
            best = max(values, key=lambda v: (len(said & meanings[v]), v == code))
            if best != code:
                problems.append(
                    f"{mention.at()}: exit code {code} documented as {meaning!r}, which is "
                    f"{values[best].name} ({best}) in router/exits.py, not {values[code].name}"
                )
    return problems


def _exit_meanings(codes: type[IntEnum]) -> dict[int, set[str]]:
    """Each code's words: its name and its comment in the source of its module."""
    import inspect

    source = inspect.getsource(inspect.getmodule(codes) or codes)
    meanings = {}
    for member in codes:
        comment = re.search(rf"^\s*{member.name} = {member.value}\s*#(.*)$", source, re.M)
        meanings[member.value] = _words(member.name) | _words(comment.group(1) if comment else "")
    return meanings


# --- environment variables -----------------------------------------------------------------


@functools.cache
def _source_strings() -> frozenset[str]:
    files = [p for d in (*SOURCE_DIRS, "tests") for p in sorted((REPO / d).rglob("*.py"))]
    return frozenset(v for f in files for v in _literals(ast.parse(f.read_text("utf-8"))))


def check_env_vars(docs: Sequence[Doc]) -> list[str]:
    """Every `JOBROUTER_*` variable the docs name is read somewhere (the product, or the tests
    and benchmarks for theirs): a string constant of that name in the source."""
    known = _source_strings()
    problems = []
    for doc in docs:
        for mention in docs_names.env_mentions(doc):
            if mention.text not in known:
                problems.append(f"{mention.at()}: ${mention.text}: nothing reads it")
    return problems


# --- HTTP routes ----------------------------------------------------------------------------


def app_routes(app: Any) -> list[tuple[frozenset[str] | None, str]]:
    """(methods, or None for a mount; path with `{}` for each parameter) of a FastAPI app."""
    return [(methods, _template(path)) for methods, path in _routes(app.routes, "")]


def _routes(routes: Iterable[Any], prefix: str) -> Iterable[tuple[frozenset[str] | None, str]]:
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:  # FastAPI >= 0.16x keeps an included router whole
            yield from _routes(included.routes, prefix + route.include_context.prefix)
        elif getattr(route, "methods", None):
            yield frozenset(route.methods), prefix + route.path
        else:  # a Mount (/ui/static): anything under it
            yield None, prefix + route.path


def _template(path: str) -> str:
    parts = [("{}" if re.fullmatch(r"\{.*\}|[A-Z][A-Z_]*", p) else p) for p in path.split("/")]
    return "/".join(parts).rstrip("/") or "/"


def check_routes(docs: Sequence[Doc], routes: list[tuple[frozenset[str] | None, str]]) -> list[str]:
    """A `METHOD /path` must be a route with that method; a bare `/path` a route, a mount, or the
    prefix of one (`/ui`, `/v1`). Paths outside the app's own first segments (`/proc/stat`) are
    not routes."""
    firsts = {path.split("/")[1] for _, path in routes if path != "/"}
    problems = []
    for doc in docs:
        if doc.name in OTHER_SERVERS_DOCS:
            continue
        for mention, method, path in docs_names.route_mentions(doc):
            if path.split("/")[1] not in firsts:
                continue
            if not _route_exists(routes, method, _template(path)):
                what = f"{method} {path}" if method else path
                problems.append(f"{mention.at()}: route {what}: the HTTP app has no such route")
    return problems


def _route_exists(
    routes: list[tuple[frozenset[str] | None, str]], method: str | None, path: str
) -> bool:
    for methods, template in routes:
        if method is None:
            if template == path or template.startswith(path + "/"):
                return True
        elif template == path and (methods is None or method in methods):
            return True
        elif methods is None and path.startswith(template + "/"):
            return True  # under a mount (/ui/static/...)
    return False


def all_problems(docs: Sequence[Doc], routes: list[tuple[frozenset[str] | None, str]]) -> list[str]:
    """Every problem of every kind (the checker's own tests plant names and look here)."""
    root = cli_tree()
    cli, _ = check_cli(docs, root)
    return [
        *cli,
        *check_standalone_flags(docs, root),
        *check_flag_claims(docs, root),
        *check_headers(docs),
        *check_config(docs),
        *check_exit_codes(docs),
        *check_env_vars(docs),
        *check_routes(docs, routes),
    ]
