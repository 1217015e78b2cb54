"""Which config file a printed command names (issue 32 item 4): the one given (absolute, so the
command runs from any folder), none when ./jobrouter.toml was found by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrouter.cli.common import settings
from jobrouter.config import CONFIG_ENV
from jobrouter.gate import certify_command


def test_a_named_config_is_named_and_a_default_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mutant: settings() keeping config_file for the default file, seen failing."""
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobrouter.toml").write_text("")
    assert settings(None).config_file is None
    assert settings(Path("jobrouter.toml")).config_file == tmp_path / "jobrouter.toml"
    monkeypatch.setenv(CONFIG_ENV, "jobrouter.toml")
    assert settings(None).config_file == tmp_path / "jobrouter.toml"


def test_the_command_quotes_what_a_shell_would_split() -> None:
    assert certify_command("A", "titles", None) == (
        "jobrouter contracts run --provider A --contract titles"
    )
    assert certify_command("A", "titles", Path("/srv/my conf/jobrouter.toml")) == (
        "jobrouter contracts run --provider A --contract titles "
        "--config '/srv/my conf/jobrouter.toml'"
    )
