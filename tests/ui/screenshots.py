"""Regenerate the console's screenshots in docs/screenshots/ (README.md shows them):

    python -m tests.ui.screenshots

Starts the test server (tests/acceptance/serve_fixture.py) with a few real jobs (one
succeeded, one unknown, one failed over), a real failing certification, then photographs each
page with Debian's headless Chromium at 1280 px, and the job list and a job at phone width."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.acceptance.conftest import start_server, stop_server
from tests.ui.conftest import CHROMIUM, EXTRA, Console, certify_quote, signed_in
from tests.ui.test_console import settle, submit

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _jobs(console: Console) -> dict[str, str]:
    made = {
        name: submit(console, console.alice, task, text)["id"]
        for name, task, text in (
            ("succeeded", "echo", "Saffron tea, 100 g"),
            ("unknown", "hang", "post to the shop"),
            ("other", "echo", "Blue ceramic mug"),
        )
    }
    for job_id in made.values():
        settle(console, console.alice, job_id)
    return made


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        gate = Path(tmp) / "gate"
        gate.touch()
        os.environ["JOBROUTER_TEST_GATE"] = str(gate)
        server = start_server(Path(tmp), extra_config=EXTRA)
        try:
            certify_quote(server)
            console = Console(
                server,
                gate,
                server.token("alice"),
                server.token("bob"),
                server.token("ops", operator=True),
            )
            jobs = _jobs(console)
            _shoot(console, jobs)
        finally:
            stop_server(server)


def _shoot(console: Console, jobs: dict[str, str]) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        login = browser.new_page(viewport={"width": 1280, "height": 720})
        login.goto(f"{console.url}/ui/login")
        login.screenshot(path=OUT / "login.png")
        ops = signed_in(browser, console, console.operator)
        pages = {
            "jobs": "/ui/jobs",
            "job-unknown": f"/ui/jobs/{jobs['unknown']}",
            "job-succeeded": f"/ui/jobs/{jobs['succeeded']}",
            "attention": "/ui/attention",
            "matrix": "/ui/matrix",
            "circuits": "/ui/circuits",
            "outbox": "/ui/outbox",
        }
        for name, path in pages.items():
            ops.goto(console.url + path)
            ops.screenshot(path=OUT / f"{name}.png", full_page=True)
        phone = signed_in(browser, console, console.alice, width=390, height=844)
        for name, path in (("jobs", "/ui/jobs"), ("job-unknown", pages["job-unknown"])):
            phone.goto(console.url + path)
            phone.screenshot(path=OUT / f"phone-{name}.png", full_page=True)
        browser.close()
    for shot in sorted(OUT.glob("*.png")):
        print(shot.relative_to(OUT.parents[1]))


if __name__ == "__main__":
    main()
