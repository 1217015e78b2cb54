"""Who is told what about a job's errors (issue 14: raw provider detail is operator-only).

Every job and attempt carries two texts:

    error         the summary: our own words only, made here from our own classification
                  (the error kind, the provider's alias, the HTTP status where one came back,
                  a fixed sentence). It never holds a provider's text, so it is what the job's
                  owner is shown, and the only text that events, webhooks and NATS carry.
    error_detail  the raw detail behind it: what the provider said (scrubbed of credentials by
                  `jobrouter.providers.redact` when the error was built), a contract check's
                  findings about the answer, an exception's text. Operators only; null when the
                  summary is all there is.

An attempt's `output` outside a win (an answer that broke the contract, kept for the operator
who resolves the attempt) is provider text too: operators only.

`disclose` is the one rule: every edge that shows a job or an attempt to a principal (the HTTP
API, its event stream's job reads, the console, the CLI) passes it through here. The Python
`Router` is in-process and trusted (it is the operator's own code): its values are whole, and
an application that shows them to its own users shows `error`, or calls `disclose` first.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import TypeVar

from jobrouter.models import Attempt, Job
from jobrouter.providers import ErrorKind, ProviderError
from jobrouter.providers.errors import AnswerTooLarge, InvalidOutput, Redirected
from jobrouter.states import AttemptState

Shown = TypeVar("Shown", Job, Attempt)


def disclose(value: Shown, *, operator: bool) -> Shown:
    """`value` as `operator` (or the job's owner, when False) may see it."""
    if operator:
        return value
    hidden: dict[str, object] = {"error_detail": None}
    if isinstance(value, Attempt) and value.state is not AttemptState.SUCCEEDED:
        hidden["output"] = None  # an answer that did not win: the provider's words
    return value.model_copy(update=hidden)


def provider_failure(exc: ProviderError) -> str:
    """The summary of a failed provider call: what its kind proves, never the provider's words.
    (Rows from before schema v11 got theirs from migration 0011, worded alike, without status.)"""
    name, status = exc.provider, exc.status
    code = f" (HTTP {status})" if status is not None else ""
    if exc.kind is ErrorKind.NOT_SENT:
        if status is None:
            return f"provider {name} was not reached: nothing was sent"
        return f"provider {name} refused the request{code} and did not act on it"
    if exc.kind is ErrorKind.REJECTED:
        if isinstance(exc, InvalidOutput):
            return f"provider {name} answered with output the task cannot use (check: {exc.check})"
        if isinstance(exc, Redirected):
            return (
                f"provider {name} answered with a redirect{code} to {_where(exc.location)}, "
                "not followed, and may have acted"
            )
        if isinstance(exc, AnswerTooLarge):
            return (
                f"provider {name} answered with more than {exc.limit} bytes (the answer cap), "
                "not read further, and may have acted"
            )
        return f"provider {name} answered with an error{code} and may have acted"
    return f"no answer came back from provider {name}{code}: the request may have run"


def _where(location: str | None) -> str:
    """A redirect's target as the summary names it: scheme, host, port and path only (a query
    or credentials in the URL are the kind of text a summary never carries)."""
    if not location:
        return "no Location"
    try:
        parts = urllib.parse.urlsplit(location)
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # an unparseable URL or port
        return "a Location that is no URL"
    if not parts.scheme or not parts.hostname:
        return "a Location that is no absolute URL"
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"[:200]


def broken_contract(provider: str) -> str:
    """The summary of an answer that breaks the task's contract (its findings are detail: they
    quote the answer)."""
    return f"provider {provider} answered with output that breaks the task's contract"


def attempts_summary(attempts: Sequence[Attempt], *, detail: bool) -> str:
    """The attempts of a job that ended failed, one clause each: their summaries, or (with
    `detail`, for `error_detail`) their detail where they have one."""
    parts = []
    for a in attempts:
        text = (a.error_detail or a.error) if detail else a.error
        parts.append(f"{a.provider}: {a.error_kind or a.state} {text or ''}".strip())
    return "; ".join(parts)
