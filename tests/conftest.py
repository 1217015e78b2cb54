"""Fixtures shared by every test folder. Keep this file minimal: folder fixtures live beside
their tests (e.g. tests/providers/conftest.py).

Tiers are decided here, by folder, never by marks sprinkled over test files: everything under a
folder of `SLOW_FOLDERS` is marked `slow` (deselected by the default run, selected by
`-m slow`); a new test file lands in the tier of the folder it is put in. See docs/testing.md.
"""

from __future__ import annotations

import errno
import gc
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis's default 200 ms deadline per example and its too_slow health check both decide on
# wall-clock time: on a busy 2-core machine they fail correct code. Off for every test; a test
# that needs its own settings passes them (the profile stays the default for the rest).
settings.register_profile(
    "jobrouter", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("jobrouter")

TESTS = Path(__file__).resolve().parent
# Seconds-to-minutes tests that start fleets of processes, drive thousands of jobs or explore
# state spaces: chaos, the flaky network, the state machines, the demo, the CLI end to end.
SLOW_FOLDERS = ("chaos", "acceptance/e2e", "store/machines", "ui")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = [TESTS / folder for folder in SLOW_FOLDERS]
    for item in items:
        if any(item.path.is_relative_to(folder) for folder in slow):
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported by collection (litellm alone is millions of objects) is set aside
    from the garbage collector, so the per-test collection below only walks what tests made."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _leaks_fail_the_test_that_made_them() -> Iterator[None]:
    """An unclosed socket, file or event loop that sits in a reference cycle is only finalized
    by the next garbage collection, and its ResourceWarning (an error here) would fail whatever
    test runs then. Collecting at the end of each test (this fixture is torn down after the
    test's own fixtures) makes the warning surface in the teardown of the test that leaked.
    What survives the test (module fixtures, caches, lazily imported modules) is then frozen,
    so each collection only walks what the next test makes (a full one costs up to 2 s under
    load once litellm is in memory)."""
    yield
    gc.collect()
    gc.freeze()


# Keys of hosted providers that litellm or an SDK would pick up from the environment by itself.
_PROVIDER_KEY_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "MISTRAL_API_KEY",
    "COHERE_API_KEY",
    "GROQ_API_KEY",
    "TOGETHERAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "HUGGINGFACE_API_KEY",
    "HF_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "VERTEXAI_CREDENTIALS",
    "GOOGLE_APPLICATION_CREDENTIALS",
)


@pytest.fixture(autouse=True)
def _no_live_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test can reach a live provider by accident: provider keys out, litellm offline."""
    for name in {*_PROVIDER_KEY_VARS, *(n for n in os.environ if n.endswith("_API_KEY"))}:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_OFFLINE_MODE", "true")


# ---- the network is unreachable: only loopback, in this process ----------------------------------

_LOOPBACK = ("127.", "::1", "localhost", "0.0.0.0")
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _loopback(address: object) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        return host.startswith(_LOOPBACK)
    return True  # AF_UNIX paths and the like are local by nature


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _loopback(address):
        raise OSError(errno.ENETUNREACH, f"tests may not reach {address!r}: network unreachable")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _loopback(address):
        return errno.ENETUNREACH
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is not None and not str(host).startswith(_LOOPBACK):
        raise socket.gaierror(socket.EAI_NONAME, f"tests may not resolve {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True, scope="session")
def _network_unreachable() -> Iterator[None]:
    """Cassette replay must never fall through to a network: any non-loopback connection or
    name lookup made by this test process fails (subprocesses have their own guards: they only
    ever get 127.0.0.1 addresses from the tests)."""
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _guarded_getaddrinfo
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _real_getaddrinfo
