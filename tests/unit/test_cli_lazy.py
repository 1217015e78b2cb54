"""The lazy command group (issue 30, quick commands): `jobrouter --help` lists every command
from `jobrouter.cli.COMMANDS` without importing any command module, each listed line is the
opening of that command's own help, each command's own help works, and running one command
imports its module alone (`submit` never pays for the engine, the contracts CLI or FastAPI)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
import typer
from rich.text import Text
from typer._click.core import Command
from typer.testing import CliRunner

from jobrouter.cli import COMMANDS, app, load_command

runner = CliRunner()
WIDE = {"COLUMNS": "300"}  # every listed line on one row of the table


def imported_after(code: str) -> set[str]:
    """The command modules (`jobrouter.cli.*`, `jobrouter.api`, ...) a fresh interpreter has
    imported after running `code`, which runs the CLI and may exit."""
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith('jobrouter')))))\n"
        f"{code}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def own_help(name: str) -> str:
    """The help text the command itself carries (a function's docstring, a group's help)."""
    command = load_command(name)
    assert command.help is not None, name
    return inspect.cleandoc(command.help)


def test_the_root_help_lists_every_command_with_its_line() -> None:
    """mutant: an entry dropped from the listing (`list_commands` skipping one), seen failing."""
    result = runner.invoke(app, ["--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = {
        line.strip("│ ").split(maxsplit=1)[0]: line.strip("│ ").split(maxsplit=1)[1].strip()
        for line in result.output.split("Commands")[1].splitlines()
        if line.startswith("│ ")
    }
    assert rows == {name: Text.from_markup(line).plain for name, (_, _, line) in COMMANDS.items()}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_line_opens_the_commands_own_help(name: str) -> None:
    """The listing is written once more in COMMANDS (so that `--help` imports nothing): it
    must stay the start of what the command says of itself.

    mutant: `submit`'s line changed to "Submit a job.", seen failing."""
    assert own_help(name).startswith(COMMANDS[name][2]), name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_commands_help_works(name: str) -> None:
    result = runner.invoke(app, [name, "--help"], env=WIDE, prog_name="jobrouter")
    assert result.exit_code == 0, (name, result.output)
    assert f"Usage: jobrouter {name}" in result.output
    opening = Text.from_markup(own_help(name).split("\n")[0]).plain
    assert opening in result.output, (name, opening)


def eager(name: str) -> Command:
    """Command `name` registered the way the CLI registered every command before it was lazy:
    `cli.command()` for a function, `cli.add_typer(group, name=...)` for a group."""
    module, attribute, _ = COMMANDS[name]
    target = getattr(import_module(f"jobrouter.cli.{module}"), attribute)
    cli = typer.Typer()
    cli.callback()(lambda: None)
    if isinstance(target, typer.Typer):
        cli.add_typer(target, name=name)
    else:
        cli.command(name=name)(target)
    group = typer.main.get_command(cli)
    assert isinstance(group, typer.core.TyperGroup)
    return group.commands[name]


def shape(command: Command) -> tuple[object, ...]:
    subcommands = getattr(command, "commands", {})
    return (
        command.name,
        command.help,
        [(p.name, p.opts, p.required, p.default) for p in command.params],
        {name: shape(sub) for name, sub in subcommands.items()},
    )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_is_the_one_an_eager_registration_builds(name: str) -> None:
    """Same name, help, options (flags, defaults, required) and subcommands as typer builds
    for a registered command; only the listed line (`short_help`) is set from COMMANDS."""
    assert shape(load_command(name)) == shape(eager(name))


def test_help_imports_no_command_module() -> None:
    """mutant: `get_command` building the real command while the root's help is formatted
    (the `_listing` stub skipped), seen failing: every command module imported."""
    seen = imported_after("from jobrouter.cli import app\napp(['--help'], prog_name='jobrouter')")
    assert not {m for m in seen if m.startswith("jobrouter.cli.")}, sorted(seen)
    assert "jobrouter.api" not in seen


def test_a_command_imports_its_own_module_alone() -> None:
    seen = imported_after(
        "from jobrouter.cli import app\napp(['submit', '--help'], prog_name='jobrouter')"
    )
    commands = {m for m in seen if m.startswith("jobrouter.cli.")}
    assert commands == {"jobrouter.cli.jobs", "jobrouter.cli.common"}, sorted(commands)


def test_submit_imports_neither_the_engine_nor_a_transport(tmp_path: Path) -> None:
    """A job submitted through the CLI (the door, the store) loads none of what runs jobs:
    the engine, the outbox delivery, the leader, the metrics, a provider transport.

    mutant: `jobrouter.api` importing `jobrouter.fleet` at its top, seen failing."""
    config = Path(__file__).resolve().parents[2] / "cassettes" / "jobrouter.toml"
    seen = imported_after(
        "import os\n"
        f"os.environ['JOBROUTER_CONFIG'] = {str(config)!r}\n"
        "from jobrouter.cli import app\n"
        "app(['submit', '-t', 'title', '-k', 'k1', '-i', '{\"listing\": \"tea\"}', "
        f"'--wait', '0', '-d', 'sqlite:///{tmp_path}/jobs.db'], prog_name='jobrouter')"
    )
    assert "jobrouter.door" in seen and "jobrouter.contracts.render" in seen  # it did submit
    heavy = {
        "jobrouter.engine",
        "jobrouter.fleet",
        "jobrouter.outbox",
        "jobrouter.leader",
        "jobrouter.metrics",
        "jobrouter.providers.transports",
    }
    assert not heavy & seen, sorted(heavy & seen)


def test_config_check_opens_no_store() -> None:
    """`config check` builds every task as the router does (its contract loaded, fingerprinted)
    and checks the database URL, but it opens no store: neither the store's parts nor the gate
    and breakers over them are imported (issue 30: the quick commands within 1 s).

    mutants: `jobrouter.store` importing `sqlstore` at its top again, `jobrouter.build`
    importing the gate at its top again, each seen failing."""
    config = Path(__file__).resolve().parents[2] / "cassettes" / "jobrouter.toml"
    seen = imported_after(
        "from jobrouter.cli import app\n"
        f"app(['config', 'check', '-c', {str(config)!r}], prog_name='jobrouter')"
    )
    assert "jobrouter.config_check" in seen and "jobrouter.contracts.loader" in seen  # it ran
    assert "jobrouter.contracts.fingerprint" in seen
    heavy = {
        "jobrouter.store.sqlstore",
        "jobrouter.breaker",
        "jobrouter.gate",
    }
    assert not heavy & seen, sorted(heavy & seen)


def test_a_mistyped_command_is_still_suggested() -> None:
    result = runner.invoke(app, ["tokn"], env=WIDE)
    assert result.exit_code == 2
    assert "Did you mean 'token'?" in result.output
