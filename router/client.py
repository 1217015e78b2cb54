"""`JobClient`: the Python client of `jobrouter serve` (httpx, async).

    intent = JobIntent("caption", {"product": {"name": "Saffron tea"}, "tone": "warm"},
                       idempotency_key=f"caption-{order_id}")    # or a fresh UUID by default
    async with JobClient("http://127.0.0.1:8000", token) as client:
        try:
            job = await client.submit(intent)
        except SubmitUnknown as unknown:      # the service could not be reached in time
            ...                                # keep unknown.idempotency_key: find(key) later,
                                               # or submit the same intent again
        job = await client.wait(job.id)

What the service answers depends on the token (router/disclosure.py): with an owner's token a
job's and an attempt's `error` is the router's own summary and `error_detail` is None (an
attempt that did not win has no `output` either); an operator token also gets the provider's
(scrubbed) words in `error_detail`.

The idempotency key belongs to the intent: it is made once, when the intent is made, and every
retry of every call sends the same key, so a retry can never create a second job. Retries
(exponential backoff, full jitter, a cap, a bounded count and time, honouring Retry-After) happen
here and only here, on transport errors and on 408/429/5xx; other 4xx answers are not retried.

Errors:

    JobClientError                  base
    ├── ProblemError                the service answered with a problem (status, type, detail)
    │   ├── NotFound                404: no such job or attempt for this token
    │   ├── IdempotencyKeyReused    422: the key was used with another payload (job_id)
    │   └── OverBudget              429: a budget covering the job has nothing left this
    │                               period (budget, retry_after); not retried: its period
    │                               may end hours later
    ├── SubmitUnknown               retries exhausted on submit: the job may or may not exist
    │                               (idempotency_key, intent): look it up with find(key)
    └── Unavailable                 retries exhausted on another call (cause)
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from jobrouter.errors import BudgetExhausted, IdempotencyConflict
from jobrouter.models import Attempt, Job, JobEvent, JsonObject, SpendAnswer
from jobrouter.providers.backoff import Backoff, parse_retry_after, tenacity_wait
from jobrouter.states import JobState, watch_ends

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
REPLAY_HEADER = "Idempotency-Replayed"
STREAM_ENDED = "stream-ended"  # the server's last event when the token stops holding (http/sse.py)


# ---- errors -------------------------------------------------------------------------------------


class JobClientError(Exception):
    """Base of every error `JobClient` raises."""


class ProblemError(JobClientError):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.type = str(body.get("type", "about:blank"))
        self.title = str(body.get("title", ""))
        self.detail = str(body.get("detail", ""))
        self.body = body
        super().__init__(f"HTTP {status} {self.title}: {self.detail}")


class NotFound(ProblemError):
    pass


class IdempotencyKeyReused(ProblemError):
    @property
    def job_id(self) -> str | None:
        value = self.body.get("job_id")
        return None if value is None else str(value)


class OverBudget(ProblemError):
    """The submit was refused, nothing written: `budget` has nothing left this period, which
    ends in `retry_after` seconds (the Retry-After header)."""

    def __init__(self, status: int, body: dict[str, Any], retry_after: float | None) -> None:
        super().__init__(status, body)
        self.budget = str(body.get("budget", ""))
        self.retry_after = retry_after


class SubmitUnknown(JobClientError):
    """Retries ran out before an answer came: the job may exist. Not a failure: find it later
    with `find(idempotency_key)`, or submit the same `intent` again (it cannot run twice)."""

    def __init__(self, intent: JobIntent, cause: BaseException) -> None:
        super().__init__(
            f"submit of {intent.task!r} with idempotency key {intent.idempotency_key!r} has an "
            f"unknown outcome ({_describe(cause)}); look it up with find(key) or submit the "
            "same intent again"
        )
        self.intent = intent
        self.idempotency_key = intent.idempotency_key
        self.cause = cause


class Unavailable(JobClientError):
    def __init__(self, what: str, cause: BaseException) -> None:
        super().__init__(f"{what}: the service did not answer usefully ({_describe(cause)})")
        self.cause = cause


class _RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# ---- values -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobIntent:
    """One thing to get done. Its key is made with it and never changes: pass your own (e.g.
    derived from your order id) or keep the default fresh UUID."""

    task: str
    input: JsonObject
    params: JsonObject = field(default_factory=dict)
    idempotency_key: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass(frozen=True)
class RetryPolicy:
    """Retry `attempts` times at most and for `deadline` seconds at most; the n-th wait is the
    product's one backoff (`jobrouter.providers.backoff`): uniform in
    [0, min(cap, initial * 2**(n-1))] (full jitter), or the server's Retry-After when it asks
    for more, up to `cap`."""

    attempts: int = 8
    initial: float = 0.25
    cap: float = 10.0
    deadline: float = 60.0

    @property
    def _backoff(self) -> Backoff:
        return Backoff(initial=self.initial, cap=self.cap, retry_after_cap=self.cap)

    def backoff(self, failures: int) -> float:
        """The wait after `failures` failures in a row (zero under `backoff.set_testing()`)."""
        return self._backoff.wait_s(failures)

    def wait(self, state: RetryCallState) -> float:
        """tenacity's wait: the backoff, or the server's Retry-After when it asks for more."""
        return tenacity_wait(self._backoff, _retry_after)(state)


def _retry_after(error: BaseException) -> float | None:
    if not isinstance(error, _RetryableStatus):
        return None
    return parse_retry_after(error.response.headers.get("Retry-After"))


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError | _RetryableStatus)


def _not_sent(exc: BaseException) -> bool:
    """Only errors where the request surely never reached the server."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


# ---- the client ---------------------------------------------------------------------------------


class JobClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        retry: RetryPolicy | None = None,
        timeout: float = 10.0,
        stream_timeout: float = 60.0,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`stream_timeout`: longest silence on an event stream before reconnecting (the
        server sends a heartbeat every [http] heartbeat seconds). Up to `max_connections`
        calls run at once, each on a kept-alive connection."""
        self.retry = retry or RetryPolicy()
        self.stream_timeout = stream_timeout
        self._http = httpx.AsyncClient(
            base_url=base_url,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> JobClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- jobs ------------------------------------------------------------------------------------

    async def submit(self, intent: JobIntent) -> Job:
        """The job of this intent: created now (`created=True`) or earlier (a replay)."""
        body = {"task": intent.task, "input": intent.input, "params": intent.params}
        headers = {"Idempotency-Key": intent.idempotency_key}
        try:
            response = await self._request("POST", "/v1/jobs", json=body, headers=headers)
        except (httpx.TransportError, _RetryableStatus) as exc:
            raise SubmitUnknown(intent, exc) from exc
        job = Job.model_validate(response.json())
        return job.model_copy(update={"created": response.headers.get(REPLAY_HEADER) != "true"})

    async def get(self, job_id: str) -> Job:
        response = await self._call("GET", f"/v1/jobs/{job_id}", what=f"reading job {job_id}")
        return Job.model_validate(response.json())

    async def find(self, idempotency_key: str) -> Job | None:
        """This token's job for the key, or None: what became of a `SubmitUnknown`."""
        response = await self._call(
            "GET",
            "/v1/jobs",
            params={"idempotency_key": idempotency_key},
            what=f"finding key {idempotency_key!r}",
        )
        items = response.json()["items"]
        return Job.model_validate(items[0]) if items else None

    async def attempts(self, job_id: str) -> list[Attempt]:
        response = await self._call(
            "GET", f"/v1/jobs/{job_id}/attempts", what=f"listing the attempts of job {job_id}"
        )
        return [Attempt.model_validate(item) for item in response.json()["items"]]

    async def cancel(self, job_id: str, reason: str = "cancelled by the owner") -> Job:
        # Safe to retry: cancelling a cancelled job answers it again.
        response = await self._call(
            "POST",
            f"/v1/jobs/{job_id}/cancel",
            json={"reason": reason},
            what=f"cancelling job {job_id}",
        )
        return Job.model_validate(response.json())

    async def resolve(
        self,
        attempt_id: str,
        outcome: Literal["succeeded", "failed", "cancelled"],
        result: Any = None,
        note: str = "",
    ) -> Job:
        """Operators: say what became of an unknown attempt. Retried only when the request
        surely never left (a second resolve would be refused, not applied twice)."""
        body = {"outcome": outcome, "result": result, "note": note}
        response = await self._call(
            "POST",
            f"/v1/attempts/{attempt_id}/resolve",
            json=body,
            what=f"resolving attempt {attempt_id}",
            only_not_sent=True,
        )
        return Job.model_validate(response.json())

    async def spend(
        self,
        by: str = "owner",
        *,
        since: str | None = None,
        until: str | None = None,
        owner: str | None = None,
    ) -> SpendAnswer:
        """What this token's owner's attempts used (an operator's: every owner's, or `owner`'s),
        grouped `by` owner, task, provider, day or month (a comma list), over `since`..`until`
        (ISO 8601; default this UTC month), with each budget's use (`GET /v1/spend`). A bad
        query is a `ProblemError` (422) naming the parameter; safe to retry, it reads."""
        params = {"by": by, "since": since, "until": until, "owner": owner}
        response = await self._call(
            "GET",
            "/v1/spend",
            params={k: v for k, v in params.items() if v is not None},
            what="reading the spend report",
        )
        return SpendAnswer.model_validate(response.json())

    async def events(self, job_id: str, after: int = 0) -> AsyncIterator[JobEvent]:
        """Every event after `after`, each once and in order, until the job settles (where
        `watch_ends` says, as for the server's stream); a broken stream is resumed from the last
        event seen (Last-Event-ID)."""
        failures = 0
        latest: JobState | None = None  # the job state the events seen announce
        while True:
            try:
                async with contextlib.aclosing(self._stream(job_id, after)) as stream:
                    async for event in stream:
                        after, failures = event.seq, 0
                        latest = event.kind.job_state or latest
                        yield event
                        if watch_ends(event.kind.job_state, caught_up=False):
                            return
                # The server ended the stream: its watch caught up with a settled job. Whether
                # it did is read from the job itself when no event of this call said so.
                if latest is None:
                    latest = (await self.get(job_id)).state
                if watch_ends(latest, caught_up=True):
                    return
            except (httpx.TransportError, _RetryableStatus) as exc:
                failures += 1
                if failures >= self.retry.attempts:
                    raise Unavailable(f"following the events of job {job_id}", exc) from exc
            await asyncio.sleep(self.retry.backoff(failures))

    # Same signature as Router.wait, so both read alike; asyncio.timeout is applied inside.
    async def wait(self, job_id: str, timeout: float | None = None) -> Job:  # noqa: ASYNC109
        """The job once it is terminal or needs attention, read from its durable record: the
        event stream only says when to look; if the stream cannot be had, the status is read
        by id instead, and a read whose retries ran out is tried again: a server out of reach
        for a while is waited for as the job is. TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            failures = 0
            while True:
                try:
                    async for _ in self.events(job_id):  # ends once the job has settled
                        pass
                except Unavailable:
                    failures += 1
                try:
                    job = await self.get(job_id)
                except Unavailable:
                    failures += 1
                else:
                    if watch_ends(job.state, caught_up=True):  # the durable record caught up
                        return job
                await asyncio.sleep(self.retry.backoff(failures))

    # ---- plumbing --------------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, *, what: str, only_not_sent: bool = False, **kwargs: Any
    ) -> httpx.Response:
        try:
            return await self._request(method, path, only_not_sent=only_not_sent, **kwargs)
        except _RetryableStatus as exc:
            raise _problem(exc.response) from None
        except httpx.TransportError as exc:
            raise Unavailable(what, exc) from exc

    async def _request(
        self, method: str, path: str, *, only_not_sent: bool = False, **kwargs: Any
    ) -> httpx.Response:
        """One call with retries; a final answer (2xx or a problem not worth retrying), else
        the last retryable error once retries are exhausted."""
        policy = self.retry
        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.attempts) | stop_after_delay(policy.deadline),
            wait=policy.wait,
            reraise=True,
            retry=retry_if_exception(_not_sent if only_not_sent else _retryable),
        )
        async for attempt in retrying:
            with attempt:
                response = await self._http.request(method, path, **kwargs)
                if (
                    response.status_code in RETRY_STATUSES
                    and not only_not_sent
                    and not _over_budget(response)
                ):
                    raise _RetryableStatus(response)
        if response.is_success:
            return response
        raise _problem(response)

    async def _stream(self, job_id: str, after: int) -> AsyncGenerator[JobEvent, None]:
        headers = {"Last-Event-ID": str(after), "Accept": "text/event-stream"}
        timeout = httpx.Timeout(self._http.timeout.connect, read=self.stream_timeout)
        path = f"/v1/jobs/{job_id}/events"
        async with self._http.stream("GET", path, headers=headers, timeout=timeout) as response:
            if response.status_code in RETRY_STATUSES:
                raise _RetryableStatus(response)
            if not response.is_success:
                await response.aread()
                raise _problem(response)
            data: list[str] = []
            kind = ""
            async for line in response.aiter_lines():
                if line:
                    name, _, value = line.partition(":")
                    if name == "data":
                        data.append(value.removeprefix(" "))
                    elif name == "event":
                        kind = value.removeprefix(" ")
                elif kind == STREAM_ENDED:
                    # the token stopped holding: what comes next (a reconnect, a read) gets
                    # the 401 that says why, as a ProblemError
                    return
                elif data:
                    yield JobEvent.model_validate_json("\n".join(data))
                    data, kind = [], ""


def _problem(response: httpx.Response) -> ProblemError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"title": response.reason_phrase, "detail": response.text[:500]}
    if response.status_code == 404:
        return NotFound(404, body)
    if _slug(body) == IdempotencyConflict.slug:
        return IdempotencyKeyReused(response.status_code, body)
    if _over_budget(response):
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return OverBudget(response.status_code, body, retry_after)
    return ProblemError(response.status_code, body)


def _over_budget(response: httpx.Response) -> bool:
    """A 429 that refuses the work for a budget (`BudgetExhausted`'s slug): final."""
    if response.status_code != 429:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and _slug(body) == BudgetExhausted.slug


def _slug(body: dict[str, Any]) -> str:
    """A problem's slug, the last part of its `type` (`urn:jobrouter:problem:<slug>`): the
    one the server's error carries (jobrouter.errors), so both sides name it once."""
    return str(body.get("type", "")).rpartition(":")[2]


__all__ = [
    "IdempotencyKeyReused",
    "JobClient",
    "JobClientError",
    "JobIntent",
    "NotFound",
    "OverBudget",
    "ProblemError",
    "RetryPolicy",
    "SubmitUnknown",
    "Unavailable",
]
