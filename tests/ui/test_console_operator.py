"""The console an operator keeps open (issue 30 item 3), in headless Chromium against the real
server: find a job by key or id from every page (in the signed-in owner's scope), the
attention queue's reason, age, deadline and provider, a job's attempts on a time axis (a hedge
overlapping, the silence before `unknown`, the resolution), certification evidence per case
with the raw record folded away, and cancel and resolve that look destructive and ask once.
With $JOBROUTER_UI_SCREENSHOTS set, each test photographs what it checked (docs/console.md)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from playwright.sync_api import Browser, Locator, Page, expect

from tests.ui.conftest import Console, shoot, signed_in
from tests.ui.test_console import settle, submit


def job_state(console: Console, job_id: str) -> str:
    answer = httpx.get(
        f"{console.url}/v1/jobs/{job_id}",
        timeout=10,
        headers={"Authorization": f"Bearer {console.operator}"},
    )
    state: str = answer.json()["state"]
    return state


def resolve(console: Console, attempt_id: str, outcome: str) -> None:
    answer = httpx.post(
        f"{console.url}/v1/attempts/{attempt_id}/resolve",
        json={"outcome": outcome, "note": "checked the shop: nothing posted"},
        timeout=10,
        headers={"Authorization": f"Bearer {console.operator}"},
    )
    assert answer.status_code == 200, answer.text


def attempts(console: Console, job_id: str) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{console.url}/v1/jobs/{job_id}/attempts",
        timeout=10,
        headers={"Authorization": f"Bearer {console.operator}"},
    )
    body: list[dict[str, Any]] = answer.json()["items"]
    return body


def find(page: Page, wanted: str) -> None:
    search = page.get_by_role("search", name="Find a job")
    search.get_by_label("Find a job").fill(wanted)
    search.get_by_role("button", name="Find").click()


def box(locator: Locator) -> tuple[float, float]:
    """Left and right edge of an element on the screen."""
    found = locator.bounding_box()
    assert found is not None
    return found["x"], found["x"] + found["width"]


def test_search_by_key_or_id_from_every_page_in_the_owners_scope(
    browser: Browser, console: Console
) -> None:
    """A key is owner-scoped: alice's search finds alice's job of the key, never bob's; an
    operator's finds every owner's and lists them with their owner.
    mutants: `idempotency_key` left out of the console's filters (the list ignores it), the
    owner's search run over every owner, and `Router.find_everywhere` without the key filter:
    each seen failing."""
    key = f"order-{uuid.uuid4()}"
    mine = submit(console, console.alice, "echo", "mine", key=key)
    theirs = submit(console, console.bob, "echo", "theirs", key=key)
    alone = submit(console, console.alice, "echo", "another key", key=f"only-{uuid.uuid4()}")
    alice = signed_in(browser, console, console.alice)
    for path in ("/ui/jobs", "/ui/attention", "/ui/matrix", "/ui/circuits"):
        alice.goto(console.url + path)
        find(alice, key)
        alice.wait_for_url(f"**/ui/jobs/{mine['id']}")
        expect(alice.get_by_role("heading", name=f"Job {mine['id']}")).to_be_visible()
    find(alice, theirs["id"])  # bob's job by its id: not alice's to see
    alice.wait_for_url("**/ui/jobs?idempotency_key=*")
    expect(alice.locator("#job-rows")).to_contain_text("No jobs match")
    alice.goto(f"{console.url}/ui/jobs?idempotency_key={key}")
    rows = alice.locator("#job-rows tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(mine["id"])
    alice.context.close()

    ops = signed_in(browser, console, console.operator)
    ops.goto(f"{console.url}/ui/outbox")
    find(ops, key)
    ops.wait_for_url("**/ui/jobs?idempotency_key=*")
    expect(ops.get_by_role("status")).to_contain_text("every owner")
    rows = ops.locator("#job-rows tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text=theirs["id"])).to_contain_text("bob")
    expect(rows.filter(has_text=mine["id"])).to_contain_text("alice")
    shoot(ops, "search-key-every-owner")
    find(ops, theirs["id"])
    ops.wait_for_url(f"**/ui/jobs/{theirs['id']}")
    find(ops, alone["idempotency_key"])  # one owner used it: the operator lands on its job
    ops.wait_for_url(f"**/ui/jobs/{alone['id']}")
    ops.context.close()


def test_attention_queue_shows_reason_age_deadline_and_provider(
    browser: Browser, console: Console
) -> None:
    """mutant: `views.reason` returning the job's stored message (which tells the reader to
    type `jobrouter resolve`) instead of the attempts' own summary: seen failing."""
    job = submit(console, console.alice, "hang", "wait in the queue")
    settle(console, console.alice, job["id"])
    ops = signed_in(browser, console, console.operator)
    ops.goto(f"{console.url}/ui/attention")
    row = ops.locator(f"#queue-{job['id']}")
    expect(row.locator(".reason")).to_contain_text("#1 hang: no answer within 0.3s")
    expect(row.locator(".reason")).not_to_contain_text("jobrouter resolve")
    expect(row.locator(".provider")).to_have_text("hang")
    expect(row.locator(".age")).to_contain_text("ago")
    expect(row.locator(".deadline")).to_contain_text("in ")  # the task's 120 s deadline
    shoot(ops, "attention")
    ops.context.close()


def test_the_unknown_jobs_page_points_at_its_form_not_at_the_cli(
    browser: Browser, console: Console
) -> None:
    """mutant: the job's stored error shown for an unknown job (as before): seen failing."""
    job = submit(console, console.alice, "hang", "which way to resolve")
    settle(console, console.alice, job["id"])
    ops = signed_in(browser, console, console.operator)
    ops.goto(f"{console.url}/ui/jobs/{job['id']}")
    reason = ops.locator("#job-reason")
    expect(reason).to_contain_text("resolve the unknown attempt with its form below")
    # what the page says (the log below keeps the router's message as it was recorded)
    expect(ops.locator("#job-live > p", has_text="jobrouter resolve")).to_have_count(0)
    expect(ops.get_by_role("form", name="Resolve attempt 1")).to_be_visible()
    shoot(ops, "job-unknown")
    ops.context.close()
    alice = signed_in(browser, console, console.alice)
    alice.goto(f"{console.url}/ui/jobs/{job['id']}")
    expect(alice.locator("#job-reason")).to_contain_text("An operator resolves it")
    alice.context.close()


def test_the_time_axis_overlaps_a_hedge(browser: Browser, console: Console) -> None:
    """`slow` answers after 0.8 s, the hedge on `fast` starts after 0.2 s of silence: its
    bar starts inside the first one's, and the lane says it is a hedge.
    mutant: every bar placed from the axis' origin (left = 0): seen failing."""
    job = submit(console, console.alice, "hedged", "hedge it")
    settle(console, console.alice, job["id"])
    page = signed_in(browser, console, console.alice)
    page.goto(f"{console.url}/ui/jobs/{job['id']}")
    first, second = page.locator("#lane-1 .bar.call"), page.locator("#lane-2 .bar.call")
    (start1, end1), (start2, end2) = box(first), box(second)
    assert start1 < start2 < end1, (start1, end1, start2, end2)
    expect(page.locator("#lane-2")).to_contain_text("hedge")
    expect(page.locator("#lane-2 .told")).to_contain_text("hedged while #1 was in flight")
    shoot(page, "job-hedged")
    page.context.close()


def test_the_time_axis_shows_the_silence_before_unknown_then_the_resolution(
    browser: Browser, console: Console
) -> None:
    """mutant: the unknown moment taken from `finished_at` (which a resolution rewrites) so
    the silence runs to the resolution: seen failing (no waiting stretch between them)."""
    job = submit(console, console.alice, "hang", "silence, then a person")
    settle(console, console.alice, job["id"])
    page = signed_in(browser, console, console.operator)
    page.goto(f"{console.url}/ui/jobs/{job['id']}")
    lane = page.locator("#lane-1")
    expect(lane.locator(".bar.silence")).to_contain_text("no answer for")
    expect(lane.locator(".bar.waiting")).to_be_visible()
    expect(lane.locator(".told")).to_contain_text("waiting for a person")
    resolve(console, attempts(console, job["id"])[0]["id"], "failed")
    page.reload()
    expect(page.locator("#job-state")).to_have_text("failed")
    silence, waiting = box(lane.locator(".bar.silence")), box(lane.locator(".bar.waiting"))
    mark = box(lane.locator(".mark"))
    assert silence[0] < silence[1] <= waiting[0] + 1 and abs(mark[0] - waiting[1]) <= 3
    expect(lane.locator(".mark")).to_contain_text("resolved failed")
    expect(lane.locator(".told")).to_contain_text("resolved failed")
    shoot(page, "job-resolved")
    page.context.close()


def test_evidence_is_summarised_per_case_with_the_raw_record_folded(
    browser: Browser, console: Console
) -> None:
    """mutant: the raw record's <details> rendered `open`: seen failing."""
    page = signed_in(browser, console, console.alice)
    page.goto(f"{console.url}/ui/matrix")
    case = page.locator("#case-fast-quote-guillemets")
    expect(case.locator(".cert-fail")).to_have_text("fail")
    expect(case.locator(".failing")).to_contain_text("behaviour: contains")
    # the in-process test provider reports no usage, and its model has no tokenizer here
    expect(case.locator(".ours")).to_have_text("not counted")
    expect(case.locator(".theirs")).to_have_text("not reported")
    raw = page.locator("#cell-fast-quote details.raw")
    expect(raw.locator("pre")).to_be_hidden()
    raw.locator("summary").click()
    expect(raw.locator("pre")).to_contain_text('"rendering"')
    shoot(page, "matrix")
    page.context.close()


def test_cancel_looks_destructive_and_asks_once(browser: Browser, console: Console) -> None:
    """The first click only asks (the job is still unknown); the second cancels.
    mutant: the `confirmed` check removed from cancel: seen failing (cancelled at once)."""
    job = submit(console, console.alice, "hang", "cancel me, after asking")
    settle(console, console.alice, job["id"])
    page = signed_in(browser, console, console.alice)
    page.goto(f"{console.url}/ui/jobs/{job['id']}")
    cancel = page.get_by_role("button", name="Cancel this job")
    expect(cancel).to_have_class("danger")
    expect(cancel).to_have_css("color", "rgb(164, 14, 38)")  # --bad: red, not the accent blue
    page.get_by_label("Reason (for the job's log)").fill("ordered twice")
    cancel.click()
    expect(page.get_by_role("heading", name=f"Cancel job {job['id']}?")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Nothing has happened yet")
    assert job_state(console, job["id"]) == "unknown"
    shoot(page, "confirm-cancel")
    page.get_by_role("button", name="Yes, cancel this job").click()
    expect(page.get_by_role("status")).to_contain_text("cancelled")
    assert job_state(console, job["id"]) == "cancelled"
    page.context.close()


def test_resolve_asks_once_and_going_back_changes_nothing(
    browser: Browser, console: Console
) -> None:
    """mutant: the `confirmed` check removed from resolve: seen failing (resolved at once)."""
    job = submit(console, console.alice, "hang", "resolve me, after asking")
    settle(console, console.alice, job["id"])
    ops = signed_in(browser, console, console.operator)
    ops.goto(f"{console.url}/ui/jobs/{job['id']}")
    form = ops.get_by_role("form", name="Resolve attempt 1")
    form.get_by_label("failed (the job may fail over)").check()
    form.get_by_label("Note: what you checked (required)").fill("nothing on the shop")
    form.get_by_role("button", name="Resolve attempt #1").click()
    expect(ops.get_by_role("heading", name="Resolve attempt #1")).to_contain_text("as failed?")
    expect(ops.locator(".confirm")).to_contain_text("may fail over to the next certified")
    assert job_state(console, job["id"]) == "unknown"
    shoot(ops, "confirm-resolve")
    ops.get_by_role("link", name="No, go back").click()
    ops.wait_for_url(f"**/ui/jobs/{job['id']}")
    assert job_state(console, job["id"]) == "unknown"
    ops.context.close()
