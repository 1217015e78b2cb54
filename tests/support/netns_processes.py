"""Processes a test starts inside its hosts (tests/support/netns.py): each with its log file,
waited for by a line it prints, stopped with SIGTERM, killed at the end if still running."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.netns import Host

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 300.0  # guard only: a router process imports for seconds under load
STOP_S = 60.0


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


class Processes:
    """What the test starts in the hosts; every one stopped (or killed) at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[Process] = []

    def start(self, host: Host, name: str, args: list[str], **env: str) -> Process:
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:  # the child keeps its own descriptor
            popen = host.popen(
                args,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            )
        process = Process(name, popen, log)
        self.started.append(process)
        return process

    async def wait_for_line(self, process: Process, text: str) -> str:
        """The first log line holding `text`; the process exiting first fails the test."""
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            for line in process.text().splitlines():
                if text in line:
                    return line
            if process.popen.poll() is not None:
                raise AssertionError(f"{process.name} exited: {process.tail()}")
            await asyncio.sleep(0.05)
        raise AssertionError(f"{process.name} printed no {text!r} within {STARTUP_S}s")

    def stop(self, process: Process) -> int | None:
        """SIGTERM, then its exit code (None: it had to be killed)."""
        if process.popen.poll() is None:
            process.popen.send_signal(signal.SIGTERM)
        try:
            return process.popen.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait()
            return None

    def close(self) -> None:
        for process in self.started:
            if process.popen.poll() is None:
                process.popen.kill()
            process.popen.wait()
