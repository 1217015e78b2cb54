"""The console's spend page in headless Chromium: reached from the navigation, it draws the
known spend per UTC day with the day's attempts of unknown cost marked (the server's providers
report no usage: every cost is unknown, never drawn as $0 spend), lists the owner's spend,
and shows an operator each budget's use."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from tests.ui.conftest import Console, shoot, signed_in
from tests.ui.test_console import settle, submit


def test_the_spend_page_charts_an_owners_days_and_marks_unknown_costs(
    browser: Browser, console: Console
) -> None:
    """Two jobs of an owner of its own (other tests' jobs are other owners'). Mutant killed:
    `_spend_chart.html` without its unknown-cost mark (today looks like $0 spend)."""
    dora = console.server.token("dora")
    for text in ("one", "two"):
        settle(console, dora, submit(console, dora, "echo", text)["id"])
    page = signed_in(browser, console, dora)
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Spend").click()
    page.wait_for_url("**/ui/spend")
    chart = page.locator("figure.spend-chart svg[role=img]")
    expect(chart).to_be_visible()
    label = chart.get_attribute("aria-label") or ""  # its dates are this month's: by its parts
    assert "$0.000000 over 2 attempts" in label, label
    assert label.endswith("2 attempts of unknown cost, marked above their day's bar."), label
    expect(chart.locator("rect.unknown")).to_have_count(1)
    row = page.locator("table.spend-lines tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("dora")
    expect(row.locator("td").nth(5)).to_have_text("unknown")
    expect(row.locator("td").nth(6)).to_have_text("2")
    expect(page.locator("table.budgets")).to_contain_text("No budget caps your spend")
    shoot(page, "spend")
    page.context.close()


def test_an_operator_sees_each_budgets_use(browser: Browser, console: Console) -> None:
    """Mutant killed: the tokens meter left out of the budgets table (the use not drawn)."""
    page = signed_in(browser, console, console.operator)
    page.goto(f"{console.url}/ui/spend")
    budget = page.locator("#budget-carol_daily")
    expect(budget).to_contain_text("owner carol")
    expect(budget).to_contain_text("0 of 100000 tokens (left 100000)")
    expect(budget.locator("meter")).to_have_attribute("max", "100000")
    page.context.close()
