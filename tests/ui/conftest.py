"""The console in a real browser: Debian's headless Chromium (/usr/bin/chromium, installed by
`.ci/run` with apt; Playwright downloads no browser) against the real server process
(tests/acceptance/serve_fixture.py), with tokens made by the real CLI."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from jobrouter.build import build_tasks
from jobrouter.certifier import certify_pair, pairs_to_certify
from jobrouter.config import load_config
from jobrouter.store import open_store
from tests.acceptance.conftest import Server, start_server, stop_server
from tests.acceptance.serve_fixture import PROVIDERS

CHROMIUM = os.environ.get("JOBROUTER_CHROMIUM", "/usr/bin/chromium")
# With $JOBROUTER_UI_SCREENSHOTS set, the tests photograph what they check into docs/console/.
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
VIEWPORT = {"width": 1200, "height": 800}
QUOTE = Path(__file__).with_name("contracts") / "quote.yaml"
CHART = Path(__file__).with_name("contracts") / "chart.yaml"
EXTRA = f"""
[tasks.gated]
contract = "{Path(__file__).parents[1] / "acceptance" / "contracts" / "echo.yaml"}"
providers = ["gated"]

[tasks.hedged]
contract = "{Path(__file__).parents[1] / "acceptance" / "contracts" / "echo.yaml"}"
providers = ["slow", "fast"]
hedge_after = 0.2

[tasks.quote]
contract = "{QUOTE}"
providers = ["fast"]

[tasks.chart]
contract = "{CHART}"
providers = ["fast"]

# The spend page's budget (tests/ui/test_console_spend.py): an owner no other test submits for.
[budgets.carol_daily]
owner = "carol"
period = "day"
tokens = 100000
"""


@dataclass
class Console:
    server: Server
    gate: Path  # the gated provider answers once this file exists
    alice: str
    bob: str
    operator: str

    @property
    def url(self) -> str:
        return self.server.url


def certify_quote(server: Server) -> None:
    """A real certification run of provider `fast` for contract `quote` (it fails the case's
    expectation), stored where the server reads the matrix."""
    certify_fast(server, "quote")


def certify_fast(server: Server, contract: str, waivers: Mapping[str, str] | None = None) -> None:
    """A real certification run of provider `fast` for `contract`, stored where the server
    reads the matrix; `waivers`: the provider's accept_unverified for this run."""

    async def go() -> None:
        config = load_config(server.config)
        [pair] = pairs_to_certify(config, build_tasks(config), provider="fast", contract=contract)
        pair = replace(pair, accept_unverified=dict(waivers or {}))
        store = await open_store(config.database.url)
        try:
            await certify_pair(store.certifications, PROVIDERS["fast"], pair, ttl_days=1)
        finally:
            await store.close()

    # On a thread of its own: Playwright's sync API keeps an event loop running on this one.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, go()).result()


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    gate = folder / "gate"
    before = os.environ.get("JOBROUTER_TEST_GATE")
    os.environ["JOBROUTER_TEST_GATE"] = str(gate)  # read by the server process it starts
    try:
        server = start_server(folder, extra_config=EXTRA)
    finally:
        if before is None:
            os.environ.pop("JOBROUTER_TEST_GATE", None)
        else:
            os.environ["JOBROUTER_TEST_GATE"] = before
    try:
        certify_quote(server)
        yield Console(
            server,
            gate,
            server.token("alice"),
            server.token("bob"),
            server.token("ops", operator=True),
        )
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Module scope, not session: Playwright's sync API keeps an event loop running on the
    main thread while it is started, and every later `asyncio.run` (other test modules'
    fixtures) would fail."""
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (as .ci/run does) "
            "or point $JOBROUTER_CHROMIUM at one"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


def shoot(page: Page, name: str) -> None:
    """The page as the test sees it, at the viewport (small PNGs), when screenshots are asked."""
    if os.environ.get("JOBROUTER_UI_SCREENSHOTS"):
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=SHOTS / f"{name}.png")


def signed_in(
    browser: Browser,
    console: Console,
    token: str,
    *,
    width: int = VIEWPORT["width"],
    height: int = VIEWPORT["height"],
) -> Page:
    """A fresh browser context signed in through the login form."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{console.url}/ui")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/jobs")
    return page
