"""The rendering evidence says what happened, one fact per field, and never disagrees with its
diagnosis (issue 32 item 2).

Before, one `system_present` meant "we sent one" for a hosted API and "the configured format
renders it" for a llama.cpp server, so the record said `system_present: true` beside "system text
dropped"; and a provider configured `gemma` whose server speaks chatml showed the configured
markers as control tokens beside a count that proves the server rendered other ones.

One test per kind of provider, each checked by `assert_consistent`, which states the rules a
script reading `--json-report` may rely on.
"""

from __future__ import annotations

from datetime import UTC, datetime

from jobrouter.contracts import Certification, Contract, certify
from jobrouter.contracts.certification import RenderingEvidence
from tests.contracts.test_contract_certify import GOOD_ANSWERS, USAGE, InspectableFake, inspection

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WITHOUT_SYSTEM = USAGE - 12  # inspection(): the prompt without its system text


def assert_consistent(rendering: RenderingEvidence) -> None:
    diagnosis = rendering.diagnosis or ""
    if diagnosis.startswith("system text dropped"):
        assert rendering.system_seen is False
    if rendering.system_seen is True:
        assert rendering.system_sent and not diagnosis
    if "markers split" in diagnosis and rendering.markers_tokenization == "measured":
        assert any(not m.special for m in rendering.markers)
    if rendering.control_tokens_special is True:
        assert rendering.rendering_seen is not False
    if rendering.rendering_seen is False:
        assert diagnosis


async def _rendering(contract: Contract, usage: int, **shown: object) -> RenderingEvidence:
    provider = InspectableFake(GOOD_ANSWERS, inspection(**shown), usage=usage)
    rendering = (await certify(provider, contract, now=NOW)).cases[0].rendering
    assert_consistent(rendering)
    return rendering


async def test_a_correct_provider_read_what_was_sent(contract: Contract) -> None:
    """mutants: `if all(matches): return True` -> "unknown", and rendering_seen always
    "unknown", both seen failing."""
    rendering = await _rendering(contract, USAGE, markers_measured=True)
    assert (rendering.system_sent, rendering.system_rendered, rendering.system_seen) == (
        True,
        True,
        True,
    )
    assert (rendering.rendering_seen, rendering.markers_tokenization) == (True, "measured")
    assert (rendering.control_tokens_special, rendering.diagnosis) == (True, None)


async def test_a_server_dropping_the_system_message_is_seen_not_to_read_it(
    contract: Contract,
) -> None:
    """Configured chatml (the system text is in the rendering), a server that drops it: sent and
    rendered, not seen. mutant: the `any(... without ...)` branch returning "unknown", seen
    failing."""
    rendering = await _rendering(contract, WITHOUT_SYSTEM, markers_measured=True)
    assert (rendering.system_sent, rendering.system_rendered, rendering.system_seen) == (
        True,
        True,
        False,
    )
    assert (rendering.diagnosis or "").startswith("system text dropped")
    assert (rendering.rendering_seen, rendering.control_tokens_special) == (False, None)


async def test_configured_gemma_on_a_chatml_server_does_not_claim_its_markers(
    contract: Contract,
) -> None:
    """Configured gemma (its markers are control tokens of Gemma's tokenizer, measured), a
    server rendering chatml: 20 tokens more than meant. The markers stay as measured; the
    record says the count contradicts the rendering. mutants: the control_tokens_special
    downgrade removed, and diagnose's `markers_measured` branch removed, both seen failing."""
    rendering = await _rendering(contract, USAGE + 20, markers_measured=True)
    assert rendering.markers_tokenization == "measured"
    assert [m.special for m in rendering.markers] == [True]
    assert (rendering.rendering_seen, rendering.control_tokens_special) == (False, None)
    assert rendering.system_seen == "unknown"
    assert rendering.diagnosis == (
        "20 tokens more than meant: the server renders another template than the configured "
        "chat format (whose markers are control tokens of this tokenizer, measured), or adds text"
    )


async def test_a_hosted_provider_without_a_chat_format(contract: Contract) -> None:
    """litellm's estimate, no rendering, no markers: only the count speaks of the system text.
    mutant: markers_tokenization always "measured", seen failing."""
    hosted = {
        "count_basis": "estimate",
        "rendered": None,
        "system_rendered": None,
        "markers": (),
        "control_tokens_special": None,
        "prompt_tokens_without_system": 15,
        "prompt_tokens": 52,
    }
    dropped = await _rendering(contract, 17, **hosted)
    assert (dropped.system_sent, dropped.system_rendered, dropped.system_seen) == (
        True,
        None,
        False,
    )
    assert (dropped.rendering_seen, dropped.markers_tokenization) == (
        "unknown",
        "configured, not measured",
    )
    arrived = await _rendering(contract, 50, **hosted)
    assert (arrived.system_seen, arrived.rendering_seen, arrived.diagnosis) == (
        True,
        "unknown",
        None,
    )


async def test_a_format_that_drops_the_system_text_itself(contract: Contract) -> None:
    """The configured rendering has no system text and the count confirms it: not seen, though
    the two prompts count the same. mutant: the `system_rendered is False` branch removed, seen
    failing ("unknown")."""
    rendering = await _rendering(
        contract,
        WITHOUT_SYSTEM,
        system_rendered=False,
        prompt_tokens=WITHOUT_SYSTEM,
        markers_measured=True,
    )
    assert (rendering.system_sent, rendering.system_seen, rendering.rendering_seen) == (
        True,
        False,
        True,
    )


async def test_nothing_to_compare_is_unknown(contract: Contract) -> None:
    provider = InspectableFake({"Great mug": ['{"sentiment": "positive"}'], "Broke": ["x"]})
    rendering = (await certify(provider, contract, now=NOW)).cases[0].rendering
    assert (rendering.system_seen, rendering.rendering_seen) == ("unknown", "unknown")


async def test_a_record_of_before_the_split_still_loads(contract: Contract) -> None:
    """mutant: the `_from_system_present` validator removed, seen failing (extra field)."""
    cert = await certify(InspectableFake(GOOD_ANSWERS), contract, now=NOW)
    data = cert.model_dump(mode="json")
    for case in data["cases"]:
        rendering = case["rendering"]
        for field in ("system_sent", "system_rendered", "system_seen", "rendering_seen"):
            del rendering[field]
        del rendering["markers_tokenization"]
        rendering["system_present"] = True
    old = Certification.model_validate(data)
    rendering = old.cases[0].rendering
    assert (rendering.system_sent, rendering.system_rendered, rendering.system_seen) == (
        True,
        True,
        "unknown",
    )
    assert old.passed == cert.passed
