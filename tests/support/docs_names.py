"""What the docs name: every CLI command line, HTTP header, config key, exit code and HTTP route
written in README.md and docs/*.md, extracted from the markdown itself (markdown-it-py parses
it: fenced code blocks and inline code spans), so that tests/support/docs_check.py can hold each
against the code. Nothing here is a list of names; each function reads the text.

A `Mention` carries the file and line it came from, so a problem reads like a compiler error.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

# Fenced blocks that hold shell command lines (an empty info string: a plain transcript).
SHELL_INFOS = frozenset({"", "bash", "sh", "shell", "console"})
# A header name: `Idempotency-Key`, `Last-Event-ID`, `X-Jobrouter-Event` (title-case words joined
# by hyphens; all-capital words such as HMAC-SHA256 or a mutant's `XXRetry-AfterXX` are not).
HEADER = re.compile(r"(?<![\w-])(?:X|[A-Z][a-z][A-Za-z0-9]*)(?:-[A-Z][A-Za-z0-9]*)+(?![\w-])")
# One word in inline code that the text calls a header: "the `Authorization` header".
NAMED_HEADER = re.compile(r"`([A-Z][A-Za-z]+)` headers?\b")
# `[section]`, `[section] key`, `[section] key = value` in inline code.
SECTION_SPAN = re.compile(r"\[([a-z_][\w.<>*-]*)\](?:\s+([a-z_][a-z0-9_]*)\b.*)?")
ROUTE_SPAN = re.compile(r"(?:(GET|POST|PUT|PATCH|DELETE) )?(/[^\s`]*)")
EXIT_MENTION = re.compile(r"\bexit(?:s| code| status)? (\d+)\b")
# A line of a TOML block that is a commented-out key (`# nats_url = "..."`): documented too.
COMMENTED_KEY = re.compile(r"^(\s*)#\s*([a-z_][a-z0-9_]*\s*=.*)$")
COMMAND_SEPARATORS = frozenset({"&&", "||", "|", ";", ">", ">>", "<", "&"})


@dataclass(frozen=True)
class Mention:
    file: str
    line: int
    text: str  # what was named, as written

    def at(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class CommandLine(Mention):
    """`jobrouter ...` as written: its words after the program, flags in a trailing comment."""

    words: tuple[str, ...] = ()
    comment_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class TomlBlock(Mention):
    table: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class Doc:
    """One markdown file: its inline code spans and fenced blocks, each with its line."""

    name: str
    text: str
    spans: list[tuple[int, str]] = field(default_factory=list)
    blocks: list[tuple[int, str, str]] = field(default_factory=list)  # line, info, content
    paragraphs: list[tuple[int, str]] = field(default_factory=list)  # inline text as written


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def parse(path: Path, root: Path) -> Doc:
    return parse_text(path.read_text("utf-8"), str(path.relative_to(root)))


def parse_text(text: str, name: str) -> Doc:
    doc = Doc(name, text)
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        line = (token.map[0] + 1) if token.map else 0
        if token.type in ("fence", "code_block"):
            doc.blocks.append((line + (token.type == "fence"), token.info.strip(), token.content))
        elif token.type == "inline":
            doc.paragraphs.append((line, token.content))
            for child in token.children or []:
                if child.type == "code_inline":
                    doc.spans.append((line, child.content))
    return doc


# --- CLI ------------------------------------------------------------------------------------


def _program_end(words: list[str]) -> int | None:
    """Where the words after the program start, if the command is jobrouter's."""
    if words and (words[0] == "jobrouter" or words[0].endswith("/jobrouter")):
        return 1
    if (
        len(words) >= 3
        and words[0].split("/")[-1].startswith("python")
        and words[1:3]
        == [
            "-m",
            "jobrouter",
        ]
    ):
        return 3
    return None


def _segments(words: list[str]) -> Iterator[list[str]]:
    current: list[str] = []
    for word in words:
        if word in COMMAND_SEPARATORS:
            yield current
            current = []
        else:
            current.append(word)
    yield current


def command_lines_in(
    source: str, doc: Doc, line: int, *, inline: bool = False
) -> list[CommandLine]:
    """The jobrouter command lines of one shell line or inline span (with `# comment` flags)."""
    code, _, comment = source.partition(" #") if not source.startswith("#") else ("", "", source)
    try:
        words = shlex.split(code.replace("[", " ").replace("]", " "), comments=False)
    except ValueError:  # an unbalanced quote in a span: split on spaces
        words = code.replace("[", " ").replace("]", " ").split()
    found = []
    for segment in _segments(words):
        start = _program_end(segment)
        if start is None:
            continue
        flags = tuple(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", comment)) if not inline else ()
        found.append(CommandLine(doc.name, line, source.strip(), tuple(segment[start:]), flags))
    return found


def cli_mentions(doc: Doc, top_level: frozenset[str], groups: frozenset[str]) -> list[CommandLine]:
    """Every jobrouter command line: in shell blocks, and in inline code. Inline code may leave
    the program out when it starts with a command group (`token list`, `jobs list --counts`)
    or with a command and a flag (`purge --drop-parked`); a bare `submit` is left alone (the
    Python API has methods of the same names)."""
    found: list[CommandLine] = []
    for start, info, content in doc.blocks:
        if info.split()[0:1] and info.split()[0] not in SHELL_INFOS:
            continue
        previous: CommandLine | None = None
        for number, raw in enumerate(content.splitlines()):
            here = start + number
            line = raw.lstrip("$ ").rstrip("\\").rstrip()
            if previous and raw.lstrip().startswith("#") and raw.startswith(" "):
                # a comment continued under the previous command line: its flags are that command's
                flags = tuple(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", raw))
                found.append(CommandLine(doc.name, here, raw.strip(), previous.words, flags))
                continue
            lines = command_lines_in(line, doc, here)
            found.extend(lines)
            previous = lines[-1] if lines else None
    for line, span in doc.spans:
        words = span.split()
        if not words:
            continue
        if words[0] in groups or (words[0] in top_level and len(words) > 1 and words[1][:1] == "-"):
            span = "jobrouter " + span
        found.extend(command_lines_in(span, doc, line, inline=True))
    return found


@dataclass(frozen=True)
class FlagClaim(Mention):
    """A sentence that says which commands take a flag: "`--json` prints ... on `submit`,
    `show` and `outbox`" (those commands), "Every command takes `--config PATH`" (all)."""

    flag: str = ""
    commands: tuple[str, ...] = ()  # empty: every command


EVERY_COMMAND = re.compile(r"Every command takes ((?:`--[a-z][a-z0-9-]*[^`]*`(?:,? and |, )?)+)")


def flag_claims(doc: Doc) -> list[FlagClaim]:
    found = []
    for line, text in doc.paragraphs:
        for sentence in re.split(r"(?<=\.)\s+", " ".join(text.split())):
            flag = re.match(r"`(--[a-z][a-z0-9-]*)`", sentence)
            if flag and " on `" in sentence:
                listed = "`" + sentence.split(" on `", 1)[1]
                names = re.findall(r"`([a-z][a-z ]*)`", listed)
                found.append(FlagClaim(doc.name, line, sentence, flag.group(1), tuple(names)))
            for every in EVERY_COMMAND.finditer(sentence):
                for name in re.findall(r"`(--[a-z][a-z0-9-]*)", every.group(1)):
                    found.append(FlagClaim(doc.name, line, sentence, name))
    return found


def standalone_flags(doc: Doc) -> list[Mention]:
    """Inline code that is a flag alone (`--grace`, `--dry-run`, `--older-than DAYS`)."""
    found = []
    for line, span in doc.spans:
        match = re.fullmatch(r"(--?[A-Za-z][\w-]*)(?:[= ].*)?", span)
        if match:
            found.append(Mention(doc.name, line, match.group(1)))
    return found


# --- HTTP headers and routes ----------------------------------------------------------------


def header_mentions(doc: Doc) -> list[Mention]:
    found = []
    for pattern in (HEADER, NAMED_HEADER):
        for match in pattern.finditer(doc.text):
            name = match.group(1) if pattern is NAMED_HEADER else match.group(0)
            line = doc.text.count("\n", 0, match.start()) + 1
            found.append(Mention(doc.name, line, name))
    return found


def route_mentions(doc: Doc) -> list[tuple[Mention, str | None, str]]:
    """(mention, method or None, path without its query) of inline code that is a path."""
    found = []
    for line, span in doc.spans:
        match = ROUTE_SPAN.fullmatch(span)
        if match:
            path = match.group(2).split("?")[0].split("#")[0]
            found.append((Mention(doc.name, line, span), match.group(1), path))
    return found


# --- configuration --------------------------------------------------------------------------


def toml_blocks(doc: Doc) -> list[TomlBlock]:
    """Each TOML block as a table, its commented-out keys (`# transport = "openai"`) included."""
    found = []
    for line, info, content in doc.blocks:
        if info.split()[0:1] != ["toml"]:
            continue
        text = "\n".join(COMMENTED_KEY.sub(r"\1\2", raw) for raw in content.splitlines())
        try:
            found.append(TomlBlock(doc.name, line, content, tomllib.loads(text)))
        except tomllib.TOMLDecodeError as exc:
            found.append(TomlBlock(doc.name, line, content, error=str(exc)))
    return found


def section_mentions(doc: Doc) -> list[tuple[Mention, list[str]]]:
    """Inline `[section]` / `[section] key` spans: (mention, the key's path)."""
    found = []
    for line, span in doc.spans:
        match = SECTION_SPAN.fullmatch(span)
        if match:
            path = match.group(1).split(".")
            if match.group(2):
                path.append(match.group(2))
            found.append((Mention(doc.name, line, span), path))
    return found


# --- exit codes -----------------------------------------------------------------------------


def exit_mentions(doc: Doc) -> list[Mention]:
    """`exit 2`, `exits 4`, `exit code 5` in the text."""
    found = []
    for match in EXIT_MENTION.finditer(doc.text):
        line = doc.text.count("\n", 0, match.start()) + 1
        found.append(Mention(doc.name, line, match.group(1)))
    return found


def exit_code_lists(doc: Doc) -> list[tuple[Mention, str]]:
    """The paragraphs that list exit codes ("Exit codes ...: `0` done, `1` error, ..."):
    (mention of the code, what the doc says it means)."""
    found = []
    for line, text in doc.paragraphs:
        if not text.lower().startswith("exit codes"):
            continue
        parts = re.split(r"`(\d+)`", text)
        for code, meaning in zip(parts[1::2], parts[2::2], strict=True):
            found.append((Mention(doc.name, line, code), meaning.strip(" ,.\n")))
    return found


def env_mentions(doc: Doc) -> list[Mention]:
    """`$JOBROUTER_CONFIG`, `JOBROUTER_NATS_URL`: jobrouter's environment variables."""
    found = []
    for match in re.finditer(r"\bJOBROUTER_[A-Z0-9_]*[A-Z0-9]\b", doc.text):
        line = doc.text.count("\n", 0, match.start()) + 1
        found.append(Mention(doc.name, line, match.group(0)))
    return found
