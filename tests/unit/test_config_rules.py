"""Configuration can only make things stricter: a task may tighten its contract's side effects,
never loosen them; under `[certification] required = true` a task without a contract must say
`certification = "none"`, and `contracts status` shows it. Each test fails on the old code
(f4844b9), which accepted all of these silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobrouter.build import build_tasks
from jobrouter.cli import app
from jobrouter.config import load_config
from jobrouter.errors import ConfigError
from tests.unit.test_door import contract

PROVIDERS = """
[providers.a]
model = "openai/x"
api_base = "http://127.0.0.1:9/v1"
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "jobrouter.toml"
    path.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "j.db"}"\n{PROVIDERS}\n{body}')
    return path


def test_a_task_without_a_contract_is_refused_when_certification_is_required(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[tasks.post]\nproviders = ["a"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "tasks.post has no contract" in str(caught.value)
    assert 'certification = "none"' in str(caught.value)


def test_saying_certification_none_runs_it_and_status_shows_it(tmp_path: Path) -> None:
    path = write(tmp_path, '[tasks.post]\nproviders = ["a"]\ncertification = "none"\n')
    assert load_config(path).tasks["post"].certification == "none"
    result = CliRunner().invoke(app, ["contracts", "status", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert 'task post: UNCERTIFIED, no contract (certification = "none")' in result.output


def test_certification_none_beside_a_contract_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f'[tasks.post]\nproviders = ["a"]\ncontract = "{contract(tmp_path)}"'
        '\ncertification = "none"\n',
    )
    with pytest.raises(ConfigError, match="remove one of the two"):
        load_config(path)


def test_a_task_may_tighten_side_effects_but_never_loosen_them(tmp_path: Path) -> None:
    loosen = write(
        tmp_path,
        f'[tasks.post]\nproviders = ["a"]\nside_effects = "none"\n'
        f'contract = "{contract(tmp_path, "external")}"\n',
    )
    with pytest.raises(ConfigError) as caught:
        build_tasks(load_config(loosen))
    assert caught.value.key == "tasks.post.side_effects"
    assert "only tighten" in str(caught.value)
    tighten = write(
        tmp_path,
        f'[tasks.post]\nproviders = ["a"]\nside_effects = "external"\n'
        f'contract = "{contract(tmp_path, "none")}"\n',
    )
    assert build_tasks(load_config(tighten))["post"].policy.exclusive
    inherit = write(
        tmp_path,
        f'[tasks.post]\nproviders = ["a"]\ncontract = "{contract(tmp_path, "external")}"\n',
    )
    assert build_tasks(load_config(inherit))["post"].policy.exclusive


def test_the_cli_submit_gets_the_door_too(tmp_path: Path) -> None:
    """`jobrouter submit` calls `Router.submit`: the same refusal, one line, exit code 5."""
    path = write(
        tmp_path,
        f'[certification]\nrequired = false\n[tasks.post]\nproviders = ["a"]\n'
        f'contract = "{contract(tmp_path)}"\n',
    )
    result = CliRunner().invoke(
        app,
        [
            "submit",
            "--config",
            str(path),
            "--task",
            "post",
            "--key",
            "k1",
            "--wait",
            "0",
            "--input",
            '{"product": {"name": "tea"}}',
            "--params",
            '{"seed": 1}',
        ],
    )
    assert result.exit_code == 5, result.output  # refused: nothing was run
    assert "params.seed: fixed by the contract's certification" in result.output
