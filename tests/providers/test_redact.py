"""The scrubber (providers/redact.py): registered key values and token-shaped credentials are
replaced in every provider text, and `cassettes check` finds the same shapes in a recording.

The five shapes below were missed by `cassettes check` before issue 14 (each parametrized case
fails on that code), and a `ProviderError` kept whatever the provider echoed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from jobrouter.logs import ScrubbingFormatter
from jobrouter.providers.cassettes import check_cassettes, write_meta
from jobrouter.providers.errors import NotSent, Rejected
from jobrouter.providers.redact import REDACTED, find_secrets, register_secret, scrub

# (name, the text around it, the credential)
SHAPES = [
    ("basic", "Authorization: Basic ", "dXNlcjpzM2NyZXQtcGFzc3dvcmQ="),
    ("replicate", "Authorization: Token ", "r8_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("azure", "Ocp-Apim-Subscription-Key: ", "0123456789abcdef0123456789abcdef"),
    ("query", "GET https://generativelanguage.example/v1/models?alt=json&key=", "k3yV4lu3xyz"),
    ("huggingface", "token ", "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm12"),
]


@pytest.mark.parametrize(("name", "before", "secret"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_credential_shape_is_scrubbed_and_found(name: str, before: str, secret: str) -> None:
    text = before + secret
    cleaned = scrub(text)
    assert secret not in cleaned and REDACTED in cleaned
    assert find_secrets(text), f"{name} not found"


@pytest.mark.parametrize(("name", "before", "secret"), SHAPES, ids=[s[0] for s in SHAPES])
def test_cassettes_check_finds_each_shape(
    tmp_path: Path, name: str, before: str, secret: str
) -> None:
    text = before + secret
    folder = tmp_path / "gemma_native" / "caption"
    folder.mkdir(parents=True)
    (folder / "case.yaml").write_text(
        "interactions:\n- request:\n    headers: {}\n    uri: http://127.0.0.1/v1\n"
        f"  response:\n    body: {{string: '{text}'}}\n"
    )
    write_meta(folder, provider="gemma_native", provider_fingerprint="p", contract_fingerprint="c")
    problems = check_cassettes(tmp_path)
    assert problems and {p.kind for p in problems} == {"secret"}, name
    assert all(secret not in p.detail for p in problems)


def test_a_registered_key_of_any_shape_is_scrubbed_from_provider_errors() -> None:
    key = "plainkey" + "42x9q"
    register_secret(key)
    error = Rejected(f"Incorrect API key provided: {key}", provider="p", status=401)
    assert key not in str(error) and key not in error.message
    assert "Incorrect API key provided" in str(error)


def test_short_values_are_not_registered() -> None:
    register_secret("no-key")  # the keyless placeholder: blanking it would garble messages
    assert scrub("sent no-key") == "sent no-key"


def test_ordinary_text_is_left_alone() -> None:
    text = "fault server says 500: the model is overloaded (retry in 2 s); max_tokens: 200"
    assert scrub(text) == text
    assert str(NotSent("connection refused", provider="p")) == "p: not_sent: connection refused"


def test_log_lines_and_tracebacks_are_scrubbed() -> None:
    key = "tracekey" + "77z1"
    register_secret(key)
    try:
        raise RuntimeError(f"upstream said: bad key {key}")
    except RuntimeError as exc:
        record = logging.LogRecord(
            "jobrouter",
            logging.ERROR,
            __file__,
            1,
            "failed with %s",
            (key,),
            (type(exc), exc, exc.__traceback__),
        )
    line = ScrubbingFormatter("%(message)s").format(record)
    assert key not in line and "upstream said" in line and "Traceback" in line


def test_a_nul_in_a_provider_text_is_written_out() -> None:
    """The store refuses text with a NUL (issue 14); a provider's error must still be stored."""
    error = Rejected("bad\x00byte", provider="p", status=500)
    assert "\x00" not in str(error) and "bad\\x00byte" in error.message


def test_credentials_in_a_url_are_scrubbed_and_found() -> None:
    text = "ClientHttpProxyError: 407, url=http://bob:hunter2-proxy@proxy.local:3128/"
    cleaned = scrub(text)
    assert "hunter2-proxy" not in cleaned
    assert f"http://bob:{REDACTED}@proxy.local:3128/" in cleaned  # who and where stay readable
    assert find_secrets(text)
    assert scrub("http://127.0.0.1:8081/v1 and https://api.example/v1") == (
        "http://127.0.0.1:8081/v1 and https://api.example/v1"
    )
