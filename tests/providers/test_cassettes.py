"""Cassettes: secrets never reach the file, replay is strict, check_cassettes finds secrets and
stale recordings. Recording goes through vcrpy against a tiny HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from vcr.errors import CannotOverwriteExistingCassetteException

from jobrouter.providers.cassettes import (
    SCRUBBED,
    Expected,
    cassette,
    cassette_path,
    check_cassettes,
    find_secrets,
    write_meta,
)

# Fake credentials, shaped like real ones so the scanner would see them.
OPENAI_KEY = "sk-test-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
BODY_KEY = "sk-body-" + "Z9y8X7w6V5u4T3s2R1q0"
CLIENT_SECRET = "cs_" + "0123456789abcdefghij"
QUERY_KEY = "AIza" + "SyA-1234567890abcdefghijklmnopqrstu"
COOKIE = "session=" + "c0ffee" * 6
ORG = "org-" + "abcdefghijklmnop"


class _Handler(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self) -> None:
        type(self).hits += 1
        length = int(self.headers.get("content-length", 0))
        request = json.loads(self.rfile.read(length) or b"{}")
        payload = json.dumps({"echo": request.get("messages"), "n": type(self).hits}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("set-cookie", COOKIE)
        self.send_header("openai-organization", ORG)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    _Handler.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _call(base: str, *, key: str = OPENAI_KEY, content: str = "hi") -> httpx.Response:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "api_key": BODY_KEY,
        "extra": {"client_secret": CLIENT_SECRET, "keep": "me"},
    }
    with httpx.Client(trust_env=False) as client:
        return client.post(
            f"{base}/v1/chat/completions",
            params={"key": QUERY_KEY},
            json=body,
            headers={
                "Authorization": f"Bearer {key}",
                "x-api-key": key,
                "OpenAI-Organization": ORG,
                "Cookie": COOKIE,
            },
        )


def _record(tmp_path: Path, base: str) -> Path:
    path = cassette_path(tmp_path / "cassettes", "local_echo", "scrub_test", "one")
    with cassette(path, record=True):
        assert _call(base).status_code == 200
    return path


def test_recording_writes_no_secret(tmp_path: Path, echo_server: str) -> None:
    path = _record(tmp_path, echo_server)
    text = path.read_text()
    for secret in (OPENAI_KEY, BODY_KEY, CLIENT_SECRET, QUERY_KEY, COOKIE, ORG):
        assert secret not in text
    lowered = text.lower()
    for header in ("authorization", "x-api-key", "openai-organization", "cookie"):
        assert f"{header}:" not in lowered
    assert SCRUBBED in text
    assert '"keep": "me"' in text  # only credentials are touched
    write_meta(
        path.parent, provider="local_echo", provider_fingerprint="p1", contract_fingerprint=None
    )
    assert check_cassettes(tmp_path / "cassettes") == []


def test_replay_serves_the_recording_without_the_server(tmp_path: Path, echo_server: str) -> None:
    path = _record(tmp_path, echo_server)
    recorded_hits = _Handler.hits
    with cassette(path, record=False):
        # a different key still matches: credentials are scrubbed before matching too
        response = _call(echo_server, key="sk-other-" + "q" * 20)
    assert response.json() == {"echo": [{"role": "user", "content": "hi"}], "n": 1}
    assert _Handler.hits == recorded_hits


def test_replay_of_an_unrecorded_request_fails(tmp_path: Path, echo_server: str) -> None:
    path = _record(tmp_path, echo_server)
    with cassette(path, record=False), pytest.raises(CannotOverwriteExistingCassetteException):
        _call(echo_server, content="a different prompt")
    missing = cassette_path(tmp_path / "cassettes", "local_echo", "scrub_test", "absent")
    with cassette(missing, record=False), pytest.raises(CannotOverwriteExistingCassetteException):
        _call(echo_server)
    assert not missing.exists()


def test_replay_plays_each_recorded_answer_once(tmp_path: Path, echo_server: str) -> None:
    path = cassette_path(tmp_path / "c", "p", "g", "repeats")
    with cassette(path, record=True):
        first = [_call(echo_server).json()["n"] for _ in range(2)]
    with cassette(path, record=False):
        replayed = [_call(echo_server).json()["n"] for _ in range(2)]
        with pytest.raises(CannotOverwriteExistingCassetteException):
            _call(echo_server)
    assert replayed == first == [1, 2]


PLANTED = f"""interactions:
- request:
    body: '{{"model": "m", "api_key": "{BODY_KEY}"}}'
    headers:
      Authorization:
      - Bearer {OPENAI_KEY}
      api-key:
      - 0123456789abcdef0123
    uri: http://127.0.0.1:8081/v1/chat/completions
  response:
    body:
      string: '{{"aws": "AKIAIOSFODNN7EXAMPLE"}}'
"""


def test_check_finds_planted_secrets_without_echoing_them(tmp_path: Path) -> None:
    folder = tmp_path / "gemma_native" / "caption"
    folder.mkdir(parents=True)
    (folder / "tea.yaml").write_text(PLANTED)
    write_meta(folder, provider="gemma_native", provider_fingerprint="p", contract_fingerprint="c")
    problems = check_cassettes(tmp_path)
    assert {p.kind for p in problems} == {"secret"}
    details = " ".join(p.detail for p in problems)
    for label in (
        "OpenAI/Anthropic-style key",
        "bearer token",
        "AWS access key id",
        "credential field",
    ):
        assert label in details
    assert OPENAI_KEY not in details and BODY_KEY not in details


def test_scanner_ignores_scrubbed_and_ordinary_text() -> None:
    assert find_secrets(f'{{"api_key": "{SCRUBBED}", "text": "a skeptical sky"}}') == []
    assert find_secrets("max_tokens: 200\nauthorization: short") == []


def _group(
    root: Path,
    provider: str,
    group: str,
    *,
    provider_fp: str,
    contract_fp: str | None,
    meta: bool = True,
) -> Path:
    folder = root / provider / group
    folder.mkdir(parents=True)
    (folder / "case.yaml").write_text("interactions: []\n")
    if meta:
        write_meta(
            folder,
            provider=provider,
            provider_fingerprint=provider_fp,
            contract_fingerprint=contract_fp,
        )
    return folder


def test_check_lists_stale_missing_and_unexpected_groups(tmp_path: Path) -> None:
    _group(tmp_path, "gemma_native", "caption", provider_fp="p1", contract_fp="c1")
    stale_contract = _group(
        tmp_path, "gemma_native", "reply", provider_fp="p1", contract_fp="c-old"
    )
    stale_provider = _group(
        tmp_path, "gemma_chatml", "caption", provider_fp="p-old", contract_fp="c1"
    )
    no_meta = _group(
        tmp_path, "gemma_chatml", "smoke", provider_fp="", contract_fp=None, meta=False
    )
    gone = _group(tmp_path, "retired", "caption", provider_fp="p9", contract_fp="c1")
    expected = Expected(
        providers={"gemma_native": "p1", "gemma_chatml": "p2"},
        contracts={"caption": "c1", "reply": "c2"},
    )
    problems = {(p.path, p.kind) for p in check_cassettes(tmp_path, expected)}
    assert problems == {
        (stale_contract, "stale"),
        (stale_provider, "stale"),
        (no_meta, "missing_meta"),
        (gone, "unexpected"),
    }
    assert {p.kind for p in check_cassettes(tmp_path)} == {"missing_meta"}  # no fingerprints


def test_stale_detail_names_what_changed(tmp_path: Path) -> None:
    _group(tmp_path, "gemma_native", "caption", provider_fp="a" * 64, contract_fp="b" * 64)
    [problem] = check_cassettes(
        tmp_path, Expected(providers={"gemma_native": "c" * 64}, contracts={"caption": "b" * 64})
    )
    assert "provider fingerprint aaaaaaaaaaaa -> cccccccccccc" in problem.detail
    assert "contract" not in problem.detail


@pytest.mark.parametrize("part", ["..", "a/b", "", ".hidden", "x" * 200])
def test_cassette_path_refuses_unsafe_parts(tmp_path: Path, part: str) -> None:
    with pytest.raises(ValueError, match="cassette path part"):
        cassette_path(tmp_path, "provider", part, "name")
