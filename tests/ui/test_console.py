"""The console at /ui in headless Chromium: list and filter, open a job, watch an attempt
finish live, resolve an unknown attempt as operator (with a note), an owner cannot see another
owner's job, the matrix shows a failing check, and a cross-site POST is refused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from jobrouter.config import load_config
from jobrouter.store import SqlStore, open_store
from jobrouter.store.live_watch import Suspension, WatchRow
from tests.ui.conftest import Console, shoot, signed_in


def submit(
    console: Console, token: str, task: str, text: str, key: str | None = None
) -> dict[str, Any]:
    answer = httpx.post(
        f"{console.url}/v1/jobs",
        json={"task": task, "input": {"text": text}},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key or str(uuid.uuid4())},
        timeout=10,
    )
    assert answer.status_code == 202, answer.text
    body: dict[str, Any] = answer.json()
    return body


def settle(console: Console, token: str, job_id: str) -> None:
    """Until the job settles: its event stream ends then (an event, not a sleep)."""
    with httpx.stream(
        "GET",
        f"{console.url}/v1/jobs/{job_id}/events",
        timeout=30,
        headers={"Authorization": f"Bearer {token}"},
    ) as events:
        for _ in events.iter_lines():
            pass


@pytest.fixture
def page(browser: Browser, console: Console) -> Iterator[Page]:
    signed = signed_in(browser, console, console.alice)
    yield signed
    signed.context.close()


def test_list_and_filter_by_state(page: Page, console: Console) -> None:
    done = submit(console, console.alice, "echo", "listed")
    hung = submit(console, console.alice, "hang", "waits")
    settle(console, console.alice, done["id"])
    settle(console, console.alice, hung["id"])
    page.reload()
    rows = page.locator("#job-rows tbody tr")
    expect(rows.filter(has_text=done["id"])).to_have_count(1)
    expect(rows.filter(has_text=hung["id"])).to_have_count(1)
    page.get_by_label("State", exact=True).select_option("unknown")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**state=unknown**")
    expect(rows.filter(has_text=hung["id"])).to_have_count(1)
    expect(rows.filter(has_text=done["id"])).to_have_count(0)
    shoot(page, "jobs")


def test_open_a_job_and_watch_its_attempt_finish_live(page: Page, console: Console) -> None:
    """The gated provider answers only once the test opens the gate, after the page shows the
    attempt started: the page must change by itself (no reload) to succeeded."""
    job = submit(console, console.alice, "gated", "live")
    page.goto(f"{console.url}/ui/jobs")
    page.get_by_role("link", name=job["id"]).click()
    expect(page.get_by_role("heading", name=f"Job {job['id']}")).to_be_visible()
    expect(page.locator(".timeline .badge").first).to_have_text("started")
    expect(page.locator("#job-state")).to_have_text("running")
    console.gate.touch()
    expect(page.locator("#job-state")).to_have_text("succeeded", timeout=30_000)
    expect(page.locator(".timeline .badge.winner")).to_be_visible()
    expect(page.locator("#job-result")).to_contain_text("Echo live")
    shoot(page, "job-succeeded")


def test_operator_resolves_an_unknown_attempt_with_a_note(
    browser: Browser, console: Console
) -> None:
    job = submit(console, console.alice, "hang", "post it")
    settle(console, console.alice, job["id"])
    owner_page = signed_in(browser, console, console.alice)
    owner_page.goto(f"{console.url}/ui/jobs/{job['id']}")
    expect(owner_page.get_by_text("an operator resolves it")).to_be_visible()
    expect(owner_page.locator("form.resolve")).to_have_count(0)
    owner_page.context.close()

    ops = signed_in(browser, console, console.operator)
    ops.goto(f"{console.url}/ui/attention")  # the needs-attention queue, actions inline
    form = ops.get_by_role("form", name=f"Resolve attempt 1 of job {job['id']}")
    form.get_by_label("Outcome").select_option("failed")
    form.get_by_label("Note: what you checked (required)").fill("checked: nothing was posted")
    form.get_by_role("button", name="Resolve #1").click()
    ops.get_by_role("button", name="Yes, resolve #1 as failed").click()
    expect(ops.get_by_role("status")).to_contain_text("attempt 1 failed")
    expect(ops.locator("#job-state")).to_have_text("failed")
    events = ops.locator("table").last
    expect(events).to_contain_text("checked: nothing was posted")
    ops.context.close()


def test_resolve_on_the_job_page_needs_a_note(browser: Browser, console: Console) -> None:
    """The browser refuses an empty note (`required`); the server refuses it too."""
    job = submit(console, console.alice, "hang", "post it too")
    settle(console, console.alice, job["id"])
    ops = signed_in(browser, console, console.operator)
    ops.goto(f"{console.url}/ui/jobs/{job['id']}")
    form = ops.get_by_role("form", name="Resolve attempt 1")
    form.get_by_label("cancelled").check()
    csrf = form.locator("input[name=csrf]").get_attribute("value")
    attempt = ops.locator(".timeline li").first.get_attribute("id") or ""
    answer = ops.request.post(
        f"{console.url}/ui/attempts/{attempt.removeprefix('attempt-')}/resolve",
        form={"csrf": csrf or "", "outcome": "cancelled", "note": " "},
    )
    assert answer.status == 422 and "Write what you checked" in answer.text()
    form.get_by_label("Note: what you checked (required)").fill("customer asked to drop it")
    form.get_by_role("button", name="Resolve attempt #1").click()
    ops.get_by_role("button", name="Yes, resolve #1 as cancelled").click()
    expect(ops.get_by_role("status")).to_contain_text("attempt 1 cancelled")
    ops.context.close()


def test_an_owner_cannot_see_another_owners_job(browser: Browser, console: Console) -> None:
    job = submit(console, console.alice, "echo", "private")
    bob = signed_in(browser, console, console.bob)
    expect(bob.locator("#job-rows")).not_to_contain_text(job["id"])
    answer = bob.goto(f"{console.url}/ui/jobs/{job['id']}")
    assert answer is not None and answer.status == 404
    expect(bob.get_by_role("heading", name="No such job")).to_be_visible()
    bob.goto(f"{console.url}/ui/jobs?owner=alice")
    expect(bob.get_by_role("alert")).to_contain_text("operator")
    bob.context.close()


def test_matrix_shows_the_failing_check(page: Page, console: Console) -> None:
    page.goto(f"{console.url}/ui/matrix")
    row = page.get_by_role("row", name="fast")
    expect(row.locator(".cert-fail")).to_have_text("fail")
    evidence = page.locator("#cell-fast-quote")
    expect(evidence.locator("tr.case .failing")).to_contain_text("behaviour: contains")
    expect(evidence).to_contain_text('expected to contain "«"')


def test_a_post_without_the_csrf_field_is_refused(page: Page, console: Console) -> None:
    """A cross-site form carries the cookie but cannot know the CSRF field."""
    job = submit(console, console.alice, "hang", "keep")
    answer = page.request.post(
        f"{console.url}/ui/jobs/{job['id']}/cancel", form={"reason": "forged"}
    )
    assert answer.status == 403
    state = httpx.get(
        f"{console.url}/v1/jobs/{job['id']}",
        timeout=10,
        headers={"Authorization": f"Bearer {console.alice}"},
    ).json()["state"]
    assert state != "cancelled"


def test_matrix_shows_the_live_answers_and_a_suspension(page: Page, console: Console) -> None:
    """What the pair's live answers showed since its certification, and why it is suspended,
    with the two ways back (the cell stays `fail`: its certification failed first)."""
    suspension = Suspension(
        at=1.0,
        rule="failure rate",
        reason="live failure rate 25% (10 of 40 answers) against a certified baseline of 2%",
        answered=40,
        failed=10,
        sample_attempts=("att-7",),
    )
    watch = WatchRow(
        "fast",
        "quote",
        answered=40,
        failed=10,
        rendering_checked=40,
        recent_failures=(("att-7", "schema: answer does not match the output schema"),),
        suspension=suspension,
    )
    in_store(console, lambda store: store.live_watch.save(watch))
    page.goto(f"{console.url}/ui/matrix")
    live = page.locator("#cell-fast-quote section.live")
    expect(live).to_contain_text("40 answered, 10 broke the contract")
    expect(live.locator("meter.live-failures")).to_have_attribute("value", "0.2500")
    expect(live).to_contain_text('Suspended 1970-01-01 00:00:01 by the rule "failure rate"')
    expect(live).to_contain_text("jobrouter contracts reinstate --provider fast --contract quote")
    expect(live.locator(".recent-failures")).to_contain_text("att-7")


def in_store(console: Console, write: Callable[[SqlStore], Awaitable[None]]) -> None:
    """`write(store)` on the console's database, on a thread of its own (Playwright's sync API
    keeps an event loop running on this one)."""

    async def go() -> None:
        store = await open_store(load_config(console.server.config).database.url)
        try:
            await write(store)
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, go()).result()
