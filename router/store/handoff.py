"""`Handoff`: where the job store hands over, once committed, the jobs a write gave this process.

A job created here, and the jobs a claim took, must reach a driver once their transaction has
committed, and only then (I7: nothing is driven that is not durable); even if the call that wrote
them was cancelled while it waited for the COMMIT (a job created but never driven would wait for
its claim and its attempt's lease to expire, and end `unknown` though never sent). So the hand-
over runs as an after-commit hook of that transaction, and goes to ONE port, the engine's, given
once when the engine is built (the store is opened before it): no write carries a callback of
its own. A process that runs no engine has no port; its jobs are claimed by the workers that do.
"""

from __future__ import annotations

from typing import Protocol

from jobrouter.models import Attempt, Job


class Dispatch(Protocol):
    def committed(self, job: Job, attempt: Attempt | None) -> None:
        """`job`, committed as this process's (created here, or claimed), with `attempt` when
        its first attempt was started in the same transaction. Runs inside the commit's
        callbacks: it must not block or raise."""


class Handoff:
    """The one port of a job store's hand-overs; until an engine connects, nobody's."""

    def __init__(self) -> None:
        self._port: Dispatch | None = None

    def connect(self, port: Dispatch) -> None:
        if self._port is not None and self._port is not port:
            raise RuntimeError("this store already hands its jobs to another engine")
        self._port = port

    def committed(self, job: Job, attempt: Attempt | None) -> None:
        if self._port is not None:
            self._port.committed(job, attempt)
