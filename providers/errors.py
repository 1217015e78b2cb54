"""The provider error taxonomy: every provider failure is one `ProviderError` with a `kind`.

    ProviderError                      kind says what is PROVEN about the request's fate
    ├── NotSent       kind=not_sent    the provider provably did not act: never sent, or refused
    │                                  with a status it documents as "not processed"
    ├── Rejected      kind=rejected    the provider answered with a failure, or with an answer we
    │   │                              cannot use, and MAY have acted (5xx, 52x, bad JSON)
    │   └── InvalidOutput              the answer is not JSON (check "json") or breaks the output
    │                                  schema (check "schema"); carries the answer and its usage
    └── OutcomeUnknown kind=unknown    the request was sent and no answer came back (a timeout, a
                                       cut connection, a gateway timeout): it may have run

Each error also carries two decisions, made where it is classified (`jobrouter.providers.classify`,
or the raise site for errors of our own making) and read by everyone else, so that nobody re-derives
them from status codes:

    retryable              our ONE retry layer may send the request again (only for errors
                           that prove the provider did not act and may accept it later)
    counts_against_health  the failure says something about the provider's health (the
                           circuit breaker counts it), not about our request

`may_have_acted` is `kind is not NOT_SENT`: the router records such an outcome on an exclusive
task (`side_effects: external`) as `unknown`, never as a failure it may fail over from (I4).

`providers/` is the only place where third-party exceptions are translated into these; the
router records `kind` on the attempt and never sees a litellm type. Every message is scrubbed
of credentials when the error is built (`jobrouter.providers.redact`).

    CassetteMiss                       NOT a ProviderError: a replayed test met a request that
                                       its cassette does not hold. Nothing was sent and nothing
                                       failed at a provider; the router must not retry or fail
                                       over on it, so the test fails loudly instead.
"""

from __future__ import annotations

from enum import StrEnum

from jobrouter.providers.redact import scrub


class ErrorKind(StrEnum):
    NOT_SENT = "not_sent"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


class ProviderError(Exception):
    kind: ErrorKind = ErrorKind.REJECTED

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        counts_against_health: bool | None = None,
        answer: str | None = None,
    ) -> None:
        """`retryable` / `counts_against_health` left None take the class's default. `answer`
        is the text of an answer we could not use (kept for whoever resolves the attempt)."""
        # Scrubbed here, where every provider error is built: its text is stored, sent to the
        # job's owner and logged, and a provider may have echoed the key it was sent.
        message = scrub(message)
        answer = scrub(answer) if answer is not None else None
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        self.answer = answer
        self.retryable = self._default_retryable() if retryable is None else retryable
        self.counts_against_health = (
            self._default_counts() if counts_against_health is None else counts_against_health
        )

    @property
    def may_have_acted(self) -> bool:
        """Whether the provider may have done the work (everything but `not_sent`)."""
        return self.kind is not ErrorKind.NOT_SENT

    def _default_retryable(self) -> bool:
        return False

    def _default_counts(self) -> bool:
        return True

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.provider}: {self.kind.value}{status}: {self.message}"


class NotSent(ProviderError):
    """Default: a transport failure before sending (connect refused, DNS): retryable, and a
    sign of the provider's health."""

    kind = ErrorKind.NOT_SENT

    def _default_retryable(self) -> bool:
        return True


class Rejected(ProviderError):
    """Default: not retried (it may have acted), and not counted against health (an answer we
    cannot use says nothing about whether the provider is up). A rejection by HTTP status is
    built by `jobrouter.providers.classify.from_status`, which decides both from the status (a 5xx
    counts); nothing here looks at the status again."""

    kind = ErrorKind.REJECTED

    def _default_counts(self) -> bool:
        return False


class InvalidOutput(Rejected):
    """The provider answered, and the answer is unusable: `check` names what failed, ``json``
    (not JSON at all) or ``schema`` (JSON that breaks the output schema). `text` is the answer
    and `prompt_tokens` the provider's reported usage, so that a certification can still name
    the failing check and compare the prompt count the provider reported; `finish_reason` is the
    provider's (``length``: cut off at max_tokens, the usual cause of a JSON that never closes)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        check: str,
        text: str,
        prompt_tokens: int | None = None,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider, answer=text)
        self.check = check
        self.text = text
        self.prompt_tokens = prompt_tokens
        self.finish_reason = finish_reason


class AnswerTooLarge(Rejected):
    """The answer (decoded) is longer than `limit` bytes: reading stopped there. The provider
    answered, so it may have acted; an answer no contract asked for is its fault (counts)."""

    def __init__(self, message: str, *, provider: str, limit: int) -> None:
        super().__init__(message, provider=provider, counts_against_health=True)
        self.limit = limit


class Redirected(Rejected):
    """A redirect answer (3xx), never followed: no other origin may answer for a certified
    provider. The server had the whole request, so it may have acted (never `not_sent`); its
    api_base is wrong or it is hostile, so it counts against health. `location` is the Location
    header (scrubbed; None when absent)."""

    def __init__(self, message: str, *, provider: str, status: int, location: str | None) -> None:
        super().__init__(message, provider=provider, status=status, counts_against_health=True)
        self.location = scrub(location) if location is not None else None


class OutcomeUnknown(ProviderError):
    kind = ErrorKind.UNKNOWN


class CassetteMiss(Exception):
    """A vcrpy cassette in replay mode has no recording for this request (a test-setup error)."""

    def __init__(self, message: str, *, provider: str) -> None:
        message = scrub(message)
        super().__init__(message)
        self.message = message
        self.provider = provider

    def __str__(self) -> str:
        return f"{self.provider}: cassette miss: {self.message}"
