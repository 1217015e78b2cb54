"""Every command's `--help` at 80 columns (issue 30): a flag shows no `<bool>` type (it takes no
value), an option's choices are never cut in the middle of a word by the wrap, and no help text
is cut to an ellipsis."""

from __future__ import annotations

import re
from collections.abc import Iterator

import typer
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from jobrouter.cli import app

runner = CliRunner()


def commands() -> Iterator[tuple[list[str], typer.core.TyperCommand | TyperGroup]]:
    """(the words that name a command, the command), the whole tree, `jobrouter` itself first."""
    pending: list[tuple[list[str], typer.core.TyperCommand | TyperGroup]] = [
        ([], typer.main.get_command(app))  # type: ignore[list-item]
    ]
    while pending:
        path, command = pending.pop(0)
        yield path, command
        if isinstance(command, TyperGroup):
            pending += [([*path, name], sub) for name, sub in command.commands.items()]


def choices(command: typer.core.TyperCommand | TyperGroup) -> list[str]:
    found = []
    for param in command.params:
        if isinstance(param, TyperOption) and param.type_descriptor.is_choice:
            found += [str(choice) for choice in param.type_descriptor.choices or ()]
    return found


def help_at_80(path: list[str]) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, (path, result.output)
    return result.output


def test_every_help_is_free_of_bool_metavars() -> None:
    """mutant: `_untyped_flags` returning the params untouched, seen failing (`--help <bool>`
    on every command)."""
    walked = list(commands())
    assert len(walked) > 20  # the whole tree, groups and their commands
    for path, _ in walked:
        assert "<bool>" not in help_at_80(path), path


def test_no_help_text_is_cut_to_an_ellipsis() -> None:
    """A word longer than the help column is cut with `…` (`postgresql://postgres@1…`).

    mutant: --database's old help (`postgresql://postgres@127.0.0.1:5432/jobs`), seen failing."""
    for path, _ in commands():
        cut = [line for line in help_at_80(path).splitlines() if "…" in line]
        assert not cut, (path, cut)


def test_no_choice_is_split_across_lines() -> None:
    """Choices written `<a|b|c>` are wrapped inside a word at 80 columns (`<queued|running|succeed`
    over `ed|failed|...`): each word joined to a `|` must be a whole choice, and each choice must
    be on one line somewhere in its command's help.

    mutant: `metavar="STATE"` removed from `jobs list --state`, seen failing."""
    checked = 0
    for path, command in commands():
        words = choices(command)
        if not words:
            continue
        text = help_at_80(path)
        joined = re.findall(r"(?<=\|)[\w-]+|[\w-]+(?=\|)", text)
        assert set(joined) <= set(words), (path, sorted(set(joined) - set(words)))
        lines = text.splitlines()
        for word in words:
            assert any(word in line for line in lines), (path, word)
            checked += 1
    assert checked >= 6  # `jobs list --state` has one choice per job state
