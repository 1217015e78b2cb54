"""Stability on the real server's recorded answers (cassettes/, recorded from llama.cpp): each
transport reads the finish reason the server sent, and the answers it cut off at max_tokens earn
the contract its `sampling.max_tokens` warning."""

from __future__ import annotations

from pathlib import Path

from jobrouter.build import build_providers
from jobrouter.config import load_config
from jobrouter.contracts import Certification, certify, load_contract
from jobrouter.contracts.lint import contract_warnings
from jobrouter.providers.cassettes import cassette
from jobrouter.recordings import LIVE_RECORD

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"


async def _replay(provider_name: str, contract_name: str) -> Certification:
    folder = CASSETTES / provider_name / contract_name
    recorded = Certification.model_validate_json((folder / LIVE_RECORD).read_text())
    provider = build_providers(load_config(CASSETTES / "jobrouter.toml"), None)[provider_name]
    try:
        with cassette(folder / "certify.yaml", record=False):
            return await certify(provider, load_contract(contract_name), now=recorded.certified_at)
    finally:
        await provider.close()  # type: ignore[attr-defined]


async def test_litellm_reads_the_servers_length_and_the_contract_is_warned() -> None:
    """gemma_hosted's server (it drops the system text) cut 6 of its 12 shop_reply answers at
    max_tokens 160 (the recording says finish_reason "length"). Mutant: LiteLLMProvider._read
    drops finish_reason (no warning, no reason recorded)."""
    cert = await _replay("gemma_hosted", "shop_reply")
    assert sum(case.cut_off_runs for case in cert.cases) == 6
    assert {reason for case in cert.cases for reason in case.finish_reasons} == {"length", "stop"}
    warnings = [w for w in contract_warnings(load_contract("shop_reply"), [cert]) if w.provider]
    assert [(w.field, w.provider) for w in warnings] == [("sampling.max_tokens", "gemma_hosted")]
    assert "6 of 12 runs were cut off at max_tokens 160" in warnings[0].found


async def test_the_openai_transport_reads_the_servers_finish_reason() -> None:
    """primary_openai (aiohttp straight to the server): every recorded answer says "stop".
    Mutant: OpenAIHTTPProvider._read drops finish_reason (None everywhere)."""
    cert = await _replay("primary_openai", "product_title")
    reasons = [reason for case in cert.cases for reason in case.finish_reasons]
    assert reasons and set(reasons) == {"stop"}
