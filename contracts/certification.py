"""The certification record: did provider P pass contract C, with the evidence, until when.

Plain pydantic values with an exact JSON round trip
(``Certification.model_validate_json(c.model_dump_json()) == c``), so that the router can store
them as JSON and a cassette replay yields the same record as the live run (timestamps come from
the `now` given to `certify`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, JsonValue

from providers.base import Message


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RenderingEvidence(_Record):
    """How the case's prompt rendered, and how the provider receives it.

    `inspected` is False when the provider cannot show its chat format (not an
    `InspectableProvider`); then `prompt_tokens` / `tokenizer` come from the provider's reported
    usage of the first run, if any, and `notes` says "prompt inspection unavailable".
    """

    ok: bool
    messages: tuple[Message, ...] = ()
    error: str | None = None
    inspected: bool = False
    accepted_roles: tuple[str, ...] | None = None
    system_present: bool | None = None
    prompt_tokens: int | None = None
    tokenizer: str | None = None
    context_window: int | None = None
    control_tokens_special: bool | None = None
    rendered: str | None = None
    notes: tuple[str, ...] = ()


class CaseEvidence(_Record):
    """One golden case: its rendering, the parsed outputs of its runs, every failure, agreement.

    `failures` are readable lines (``run 2/3: number at price: found 39.9, expected ...``);
    `outputs` holds the parsed output of each run that returned one (JSON values).
    """

    name: str
    passed: bool
    rendering: RenderingEvidence
    runs: int
    outputs: tuple[JsonValue, ...] = ()
    failures: tuple[str, ...] = ()
    agreement: float | None = None


class Certification(_Record):
    """Provider `provider` passed (or not) contract `contract` at `certified_at`."""

    provider: str
    provider_fingerprint: str
    contract: str
    contract_version: int
    contract_fingerprint: str
    passed: bool
    cases: tuple[CaseEvidence, ...]
    failures: tuple[str, ...] = ()  # failures not tied to a case (e.g. a contract with no cases)
    certified_at: AwareDatetime
    expires_at: AwareDatetime

    @property
    def first_failure(self) -> str | None:
        """The first failure, prefixed with its case name, or None."""
        if self.failures:
            return self.failures[0]
        for case in self.cases:
            if case.failures:
                return f"{case.name}: {case.failures[0]}"
            if not case.passed:
                return f"{case.name}: failed"
        return None

    def is_valid_for(
        self, contract_fingerprint: str, provider_fingerprint: str, now: datetime
    ) -> tuple[bool, str]:
        """Whether this record certifies that provider for that contract at `now`, and why.

        Reasons, in the order checked: ``stale: contract changed``, ``stale: provider changed``,
        ``expired at <iso time>``, ``failed: <first failure>``; when valid,
        ``valid until <iso time>``.
        """
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware (e.g. datetime.now(UTC))")
        if contract_fingerprint != self.contract_fingerprint:
            return False, "stale: contract changed"
        if provider_fingerprint != self.provider_fingerprint:
            return False, "stale: provider changed"
        if now >= self.expires_at:
            return False, f"expired at {self.expires_at.isoformat()}"
        if not self.passed:
            return False, f"failed: {self.first_failure or 'no passing evidence'}"
        return True, f"valid until {self.expires_at.isoformat()}"
