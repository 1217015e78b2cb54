"""The docs are checked, not trusted (issue 30): every CLI command and flag, HTTP header, config
key, exit code, environment variable and HTTP route that README.md and docs/*.md name is held
against the code (tests/support/docs_names.py reads the markdown, tests/support/docs_check.py
holds each name against the click tree, the source's header constants, the pydantic config
model, router/exits.py and the FastAPI app's routes).

The second half tests the checker itself: names planted in a copy of the docs are reported, each
at its file and line, and nothing else is.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.config import CertificationConfig, RouterConfig
from jobrouter.http.app import create_app
from jobrouter.http.jobs import REPLAY_HEADER
from tests.support import docs_check, docs_names
from tests.support.docs_check import REPO, Command
from tests.support.docs_names import Doc

Routes = list[tuple[frozenset[str] | None, str]]


@pytest.fixture(scope="module")
def docs() -> list[Doc]:
    return docs_check.load_docs()


@pytest.fixture(scope="module")
def cli() -> Command:
    return docs_check.cli_tree()


@pytest.fixture
async def routes(tmp_path: Path) -> AsyncIterator[Routes]:
    """The routes of the app `jobrouter serve` runs (console included), over an empty store."""
    config = RouterConfig(certification=CertificationConfig(required=False))
    db = f"sqlite:///{tmp_path / 'docs.db'}"
    async with Router.open(db, config, providers={}, run_workers=False) as router:
        yield docs_check.app_routes(create_app(router))


def test_every_command_and_flag_the_docs_write_exists(docs: list[Doc], cli: Command) -> None:
    problems, named = docs_check.check_cli(docs, cli)
    assert problems == []
    assert len(named) > 15  # the extraction found the docs' commands (not a vacuous pass)


def test_every_flag_written_alone_is_a_flag_of_a_command(docs: list[Doc], cli: Command) -> None:
    assert docs_check.check_standalone_flags(docs, cli) == []


def test_what_the_docs_say_about_which_commands_take_a_flag_holds(
    docs: list[Doc], cli: Command
) -> None:
    assert docs_check.check_flag_claims(docs, cli) == []
    claims = [c for d in docs for c in docs_names.flag_claims(d)]
    assert any(c.flag == "--json" and "outbox" in c.commands for c in claims)


def test_every_command_is_documented(docs: list[Doc], cli: Command) -> None:
    """`jobrouter --help` lists every command, but a reader of README.md or docs/ should meet
    each one too, with what it is for: every command that runs (groups alone print help)."""
    _, named = docs_check.check_cli(docs, cli)
    assert docs_check.undocumented_commands(named, cli) == []


def test_every_header_the_docs_name_is_read_or_sent(docs: list[Doc]) -> None:
    problems = docs_check.check_headers(docs)
    assert problems == []
    assert "idempotency-key" in docs_check.known_headers()  # the constants were found


def test_the_replay_header_the_readme_names_is_the_one_sent(docs: list[Doc]) -> None:
    """Issue 30 item 4: README said `Idempotency-Replayed`; the server sent `Idempotent-Replayed`
    until then."""
    readme = [d for d in docs if d.name == "README.md"]
    assert [p for p in docs_check.check_headers(readme) if "Replayed" in p] == []
    assert REPLAY_HEADER in {m.text for m in docs_names.header_mentions(readme[0])}


def test_every_config_key_the_docs_name_is_in_the_model(docs: list[Doc]) -> None:
    assert docs_check.check_config(docs) == []
    blocks = [b for d in docs for b in docs_names.toml_blocks(d)]
    assert len(blocks) >= 10


def test_every_exit_code_the_docs_name_is_the_code_of_that_meaning(docs: list[Doc]) -> None:
    assert docs_check.check_exit_codes(docs) == []
    listed = [code for d in docs for code, _ in docs_names.exit_code_lists(d)]
    assert len(listed) == 9  # README's list of every code


def test_every_environment_variable_the_docs_name_is_read(docs: list[Doc]) -> None:
    assert docs_check.check_env_vars(docs) == []


async def test_every_route_the_docs_name_is_served(docs: list[Doc], routes: Routes) -> None:
    assert docs_check.check_routes(docs, routes) == []
    assert (frozenset({"POST"}), "/v1/jobs") in routes


# --- the checker itself -----------------------------------------------------------------------

PLANTED = """
## Planted by test_docs_match_code

```bash
jobrouter submit --task caption --frobnicate
jobrouter jobs list --state queued   # also --sort-by
```

Run `jobrouter tokens list`, `token list --all`, then `--frobnicate-all`.

`--json` prints JSON on `submit` and `serve`. Every command takes `--grace N`.

A replayed job carries `X-Jobrouter-Bogus: 1`, a busy server `Retry-Later`, and a missing job
`Job-Not-Found` (a problem's slug in the code, not a header).

```toml
[submit]
max_input_width = 3

[providers.p]
timeout = { connect = 5, reed = 30 }
# transprot = "openai"
```

Set `[breaker] cool_down` and `[bogus] key`.

The command exits 9.

Exit codes: `0` done, `3` cancelled.

Read `GET /v1/jobz`, `POST /v1/jobs/{id}`, `/health/alive` and `$JOBROUTER_BOGUS`.
"""

EXPECTED = [
    "jobrouter submit has no --frobnicate",
    "jobrouter jobs list has no --sort-by",
    "no command 'jobrouter tokens'",
    "jobrouter token list has no --all",
    "flag --frobnicate-all: no jobrouter command has it",
    "says --json is taken by these commands, but not by: serve",
    "says --grace is taken by every command, but not by: cancel,",
    "header Job-Not-Found",
    "header X-Jobrouter-Bogus",
    "header Retry-Later",
    "no key submit.max_input_width",
    "no key providers.p.timeout.reed",
    "no key providers.p.transprot",
    "no key breaker.cool_down",
    "no key bogus",
    "exit 9: not in router/exits.py",
    "exit code 3 documented as 'cancelled', which is CANCELLED (7)",
    "route GET /v1/jobz",
    "route POST /v1/jobs/{id}",
    "route /health/alive",
    "$JOBROUTER_BOGUS: nothing reads it",
]


def _copy_docs(into: Path) -> Path:
    (into / "docs").mkdir(parents=True)
    for path in docs_names.doc_files(REPO):
        shutil.copy(path, into / path.relative_to(REPO))
    return into


async def test_names_planted_in_a_copy_of_the_docs_are_each_reported(
    tmp_path: Path, routes: Routes
) -> None:
    """Mutant: each kind of bogus name written into docs/operations.md of a copy (a flag, a
    command, a header, a config key, an exit code and its meaning, a route, a variable); the
    checker reports each planted one at its line, and only those."""
    copy = _copy_docs(tmp_path / "copy")
    before = set(docs_check.all_problems(docs_check.load_docs(copy), routes))
    target = copy / "docs" / "operations.md"
    first_line = target.read_text("utf-8").count("\n") + 1
    target.write_text(target.read_text("utf-8") + PLANTED, "utf-8")

    new = set(docs_check.all_problems(docs_check.load_docs(copy), routes)) - before
    for expected in EXPECTED:
        found = [p for p in new if expected in p]
        assert found, f"not reported: {expected}\n" + "\n".join(sorted(new))
        assert all(p.startswith("docs/operations.md:") for p in found)
        assert all(int(p.split(":")[1]) >= first_line for p in found), found
    assert len(new) == len(EXPECTED), "\n".join(sorted(new))


def test_a_command_the_docs_never_name_is_reported(cli: Command) -> None:
    """Mutant: README.md without its `jobrouter resolve` line (docs/ still names it inline)."""
    readme = REPO / "README.md"
    text = "".join(
        line for line in readme.read_text("utf-8").splitlines(True) if "resolve" not in line
    )
    doc = docs_names.parse_text(text, "README.md")
    _, named = docs_check.check_cli([doc], cli)
    missing = docs_check.undocumented_commands(named, cli)
    assert "jobrouter resolve" in missing
    assert "jobrouter submit" not in missing
