"""The provider error taxonomy: every provider failure is one `ProviderError` with a `kind`.

    ProviderError                      kind says what is known about the request's fate
    ├── NotSent       kind=not_sent    the request never reached the provider: safe to retry
    ├── Rejected      kind=rejected    the provider answered, and the answer is a definite failure
    │   └── InvalidOutput                the answer is not JSON (check "json") or breaks the output
    │                                    schema (check "schema"); carries the answer and its usage
    └── OutcomeUnknown kind=unknown    the request was sent and no answer came back: it may have run

`providers/` is the only place where third-party exceptions are translated into these; the
router records `kind` on the attempt and never sees a litellm type. Every message is scrubbed
of credentials when the error is built (`providers.redact`).

    CassetteMiss                       NOT a ProviderError: a replayed test met a request that
                                       its cassette does not hold. Nothing was sent and nothing
                                       failed at a provider; the router must not retry or fail
                                       over on it, so the test fails loudly instead.
"""

from __future__ import annotations

from enum import StrEnum

from providers.redact import scrub


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
    ) -> None:
        # Scrubbed here, where every provider error is built: its text is stored, sent to the
        # job's owner and logged, and a provider may have echoed the key it was sent.
        message = scrub(message)
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.provider}: {self.kind.value}{status}: {self.message}"


class NotSent(ProviderError):
    kind = ErrorKind.NOT_SENT


class Rejected(ProviderError):
    kind = ErrorKind.REJECTED


class InvalidOutput(Rejected):
    """The provider answered, and the answer is unusable: `check` names what failed, ``json``
    (not JSON at all) or ``schema`` (JSON that breaks the output schema). `text` is the answer
    and `prompt_tokens` the provider's reported usage, so that a certification can still name
    the failing check and compare the prompt count the provider reported."""

    def __init__(self, message: str, *, provider: str, check: str, text: str,
                 prompt_tokens: int | None = None) -> None:
        super().__init__(message, provider=provider)
        self.check = check
        self.text = text
        self.prompt_tokens = prompt_tokens


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
