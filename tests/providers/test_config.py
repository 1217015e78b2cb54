"""ProviderConfig validation and the provider fingerprint."""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from jobrouter.providers.config import ProviderConfig, provider_fingerprint

BASE: dict[str, Any] = {"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}


def test_defaults() -> None:
    config = ProviderConfig(**BASE)
    assert (config.timeout.connect, config.timeout.read) == (5.0, 30.0)
    assert config.max_concurrency == 16
    assert config.structured_output == "json_schema"
    assert (config.retry.attempts, config.retry.initial, config.retry.max) == (3, 0.2, 5.0)
    assert config.rate_limit.requests_per_minute is None
    assert config.chat_format is None and config.context_window is None


@pytest.mark.parametrize(
    "value",
    [
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
        "sk_live_0123456789abcdef",
        "AIzaSyA1234567890abcdefghijkl",
        "ABCDEF0123456789ABCDEF0123456789",
    ],
)
def test_a_key_in_api_key_env_is_refused_without_echo(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ProviderConfig(model="openai/x", api_key_env=value)
    assert value not in str(caught.value)
    assert "api_key_env" in str(caught.value)


@pytest.mark.parametrize("value", ["openai_api_key", "MY-KEY", "1KEY", "", "A B"])
def test_api_key_env_must_be_an_env_var_name(value: str) -> None:
    with pytest.raises(ValidationError):
        ProviderConfig(model="openai/x", api_key_env=value)


@pytest.mark.parametrize(
    "fields",
    [
        {"unknown": 1},
        {"timeout": {"connect": 0}},
        {"max_concurrency": 0},
        {"structured_output": "grammar"},
        {"retry": {"attempts": 0}},
        {"retry": {"initial": 2, "max": 1}},
        {"rate_limit": {"requests_per_minute": 0}},
        {"extra_params": {"num_retries": 2}},
        {"extra_params": {"api_key": "x"}},
        {"extra_params": {"f": object()}},
    ],
)
def test_invalid_configs_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ProviderConfig(**{**BASE, **fields})


def test_config_is_frozen() -> None:
    config = ProviderConfig(**BASE)
    with pytest.raises(ValidationError):
        config.model = "other"  # type: ignore[misc]


def fp(name: str = "primary", **fields: Any) -> str:
    return provider_fingerprint(name, ProviderConfig(**{**BASE, **fields}))


def test_fingerprint_is_stable_hex_sha256() -> None:
    assert fp() == fp()
    assert len(fp()) == 64 and int(fp(), 16) >= 0
    # dict order does not matter: canonical JSON
    assert fp(extra_params={"top_p": 1, "seed": 2}) == fp(extra_params={"seed": 2, "top_p": 1})


@pytest.mark.parametrize(
    "change",
    [
        {"model": "openai/gpt-4o"},
        {"api_base": "http://127.0.0.1:1/v1"},
        {"structured_output": "none"},
        {"chat_format": "gemma"},
        {"extra_params": {"top_p": 0.5}},
        {"accept_unverified": {"rendering": "hosted; accepted by ops"}},
    ],
)
def test_behaviour_changes_change_the_fingerprint(change: dict[str, Any]) -> None:
    assert fp(**change) != fp()


@pytest.mark.parametrize(
    "change",
    [
        {"api_key_env": "OTHER_KEY"},
        {"timeout": {"read": 99}},
        {"max_concurrency": 2},
        {"retry": {"attempts": 1}},
        {"rate_limit": {"requests_per_minute": 5}},
        {"context_window": 1000},
    ],
)
def test_operational_changes_keep_the_fingerprint(change: dict[str, Any]) -> None:
    assert fp(**change) == fp()


def test_a_waiver_names_its_check_and_a_reason() -> None:
    """A certification earned under a waiver goes stale when the waiver changes; without one,
    older fingerprints stay as they were (no waiver is not a new field in the identity)."""
    reason = "hosted; accepted by ops"
    assert fp(accept_unverified={"rendering": reason}) != fp(accept_unverified={"rendering": "x"})
    assert fp(accept_unverified={}) == fp()
    with pytest.raises(ValidationError, match="needs a reason"):
        ProviderConfig(**{**BASE, "accept_unverified": {"rendering": "  "}})
    with pytest.raises(ValidationError):
        ProviderConfig(**{**BASE, "accept_unverified": {"schema": reason}})  # only rendering


def test_fingerprint_includes_the_provider_name() -> None:
    assert fp("primary") != fp("backup")


def test_importing_providers_does_not_import_litellm() -> None:
    """Lazy import: the router and the CLI pay for litellm only when a provider is called."""
    import subprocess

    code = (
        "import sys, jobrouter.providers, jobrouter.providers.config, "
        "jobrouter.providers.litellm_provider, jobrouter.providers.classify, "
        "jobrouter.providers.resilience; print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"fallbacks": ["openai/gpt-4o"]}, "never certified"),
        ({"context_window_fallbacks": [{"a": "b"}]}, "never certified"),
        ({"mock_response": "hi"}, "without calling the provider"),
        ({"api_key": "x"}, "api_key_env"),
        ({"extra_headers": {"X": "y"}}, "api_key_env"),
        ({"num_retries": 2}, "one retry layer"),
        ({"max_retries": 0}, "one retry layer"),
        ({"temperature": 0.3}, "from the contract"),
        ({"metadata": {"x": 1}}, "not an allowed parameter"),
        ({"top_p": {"nested": 1}}, "must be a int or float"),
        ({"stop": ["a", {"b": 1}]}, "list of strings"),
    ],
)
def test_extra_params_is_an_allow_list_naming_the_key(extra: dict[str, Any], says: str) -> None:
    """Fails on the old code for fallbacks, mock_response, extra_headers, metadata and the
    nested values: only a short list of reserved names was refused."""
    with pytest.raises(ValidationError) as caught:
        ProviderConfig(**{**BASE, "extra_params": extra})
    text = str(caught.value)
    assert f"extra_params.{next(iter(extra))}" in text and says in text


def test_allowed_extra_params_pass() -> None:
    extra = {"top_p": 0.9, "seed": 7, "stop": ["\n\n"], "user": "shop", "top_k": 40}
    assert ProviderConfig(**{**BASE, "extra_params": extra}).extra_params == extra


NATIVE: dict[str, Any] = {
    "model": "openai/gemma-3-270m",
    "api_base": "http://127.0.0.1:8081/v1",
    "transport": "openai",
}


def test_transport_defaults_to_litellm_and_openai_is_accepted_where_it_fits() -> None:
    assert ProviderConfig(**BASE).transport == "litellm"
    assert ProviderConfig(**NATIVE).transport == "openai"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"model": "anthropic/claude-3-haiku"}, "model = 'anthropic/claude-3-haiku'"),
        ({"model": "openai/"}, "model = 'openai/'"),
        ({"model": "gpt-4o-mini"}, 'needs model = "openai/<name>"'),
        ({"api_base": None}, "needs api_base"),
        ({"api_base": "127.0.0.1:8081/v1"}, "api_base = '127.0.0.1:8081/v1'"),
        ({"api_base": "ftp://127.0.0.1/v1"}, "needs an http:// or https:// api_base"),
        ({"transport": "aiohttp"}, "transport"),
    ],
)
def test_transport_openai_is_refused_where_it_does_not_fit(
    fields: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        ProviderConfig(**{**NATIVE, **fields})
    assert says in str(caught.value)
    if fields.get("transport") is None:
        assert "remove transport" in str(caught.value)  # the fix is named


def test_the_transport_is_in_the_fingerprint_only_when_it_is_not_litellm() -> None:
    """A certification earned through litellm is not reused by the native transport; the
    fingerprints of litellm providers are what they were before the key existed (their
    certifications and cassettes stay valid)."""
    litellm = {**NATIVE, "transport": "litellm"}
    assert provider_fingerprint("p", ProviderConfig(**NATIVE)) != provider_fingerprint(
        "p", ProviderConfig(**litellm)
    )
    before = {
        "name": "p",
        "model": NATIVE["model"],
        "api_base": NATIVE["api_base"],
        "structured_output": "json_schema",
        "chat_format": None,
        "extra_params": {},
    }
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert (
        provider_fingerprint("p", ProviderConfig(**litellm))
        == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    )
