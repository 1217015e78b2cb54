"""`jobrouter config check` reports every problem in one run (issue 30): schema errors, and
beside them what only building the file finds (a missing contract file, a webhook secret that
is not set); and an unset secret by the same rule `serve` refuses to start by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobrouter.api import Router
from jobrouter.config import load_config
from jobrouter.errors import ConfigError
from jobrouter.exits import Exit

SECRET = "JOBROUTER_TEST_CHECK_SECRET"
WEBHOOK = f"""
[webhooks.shop]
url = "https://hooks.example/jobrouter"
secret_env = "{SECRET}"
"""


def check(file: Path, **env: str) -> tuple[int, dict[str, str]]:
    """Exit code and {key: message} of `config check --json`."""
    from jobrouter.cli import app

    result = CliRunner().invoke(app, ["config", "check", "--json", str(file)], env=env)
    report: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, {p["key"]: p["message"] for p in report["problems"]}


def write(tmp_path: Path, body: str) -> Path:
    file = tmp_path / "jobrouter.toml"
    file.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\n' + body)
    return file


@pytest.fixture(autouse=True)
def _no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET, raising=False)


def test_schema_errors_a_missing_contract_and_an_unset_secret_in_one_run(tmp_path: Path) -> None:
    """Before, a file with a schema error stopped there: the missing contract and the secret
    came up one fix later each.

    mutant: `_sections_built` not called for an invalid file, seen failing."""
    file = write(
        tmp_path,
        '[certification]\nrequired = false\n[providers.primary]\nmodel = "openai/x"\n'
        '[tasks.caption]\nproviders = ["primary"]\ncontract = "nothere.yaml"\n'
        '[tasks.title]\nproviders = ["primary"]\nmax_atempts = 2\n' + WEBHOOK,
    )
    code, problems = check(file)
    assert code == Exit.ERROR
    assert "did you mean 'max_attempts'?" in problems["tasks.title.max_atempts"]
    assert "nothere.yaml" in problems["tasks.caption.contract"]
    assert SECRET in problems["webhooks.shop.secret_env"]


def test_a_valid_file_with_an_unset_secret_is_not_valid(tmp_path: Path) -> None:
    """mutant: the valid file's `unset_secrets` dropped, seen failing (it said "valid")."""
    file = write(
        tmp_path,
        '[certification]\nrequired = false\n[providers.primary]\nmodel = "openai/x"\n'
        '[tasks.caption]\nproviders = ["primary"]\n' + WEBHOOK,
    )
    code, problems = check(file)
    assert code == Exit.ERROR and list(problems) == ["webhooks.shop.secret_env"]
    assert check(file, **{SECRET: "s3cret"}) == (Exit.OK, {})


async def test_the_check_and_the_router_refuse_by_the_same_rule(tmp_path: Path) -> None:
    """What `config check` says is what `serve` (a router with workers) refuses to open with."""
    file = write(tmp_path, "[certification]\nrequired = false\n" + WEBHOOK)
    _, problems = check(file)
    with pytest.raises(ConfigError) as refused:
        await Router.open(config=file)
    assert refused.value.key == "webhooks.shop.secret_env"
    assert refused.value.reason == problems["webhooks.shop.secret_env"]


def test_a_bus_claim_longer_than_the_dedupe_window_is_reported_at_its_key(tmp_path: Path) -> None:
    """A rule of two keys lives in the config model, so `config check` names it, with the key
    to change and what to do; `load_config` (what `serve` opens) says the same with the file.
    mutants seen failing: the key not read from the error's context (reported at "(file)");
    the rule left in fleet.build_delivery only (the check said "valid")."""
    file = write(
        tmp_path,
        "[certification]\nrequired = false\n[outbox]\nclaim = 60\n"
        '[delivery]\nnats_url = "nats://127.0.0.1:4222"\ndedupe_window = 30\n' + WEBHOOK,
    )
    code, problems = check(file, **{SECRET: "s3cret"})
    assert code == Exit.ERROR and list(problems) == ["delivery.dedupe_window"]
    message = problems["delivery.dedupe_window"]
    assert "[outbox] claim (60.0s) must be shorter than" in message
    assert "raise dedupe_window above the claim, or shorten [outbox] claim" in message
    with pytest.raises(ConfigError) as refused:
        load_config(file)
    assert refused.value.key == "delivery.dedupe_window" and refused.value.file == str(file)
    assert refused.value.reason == message
