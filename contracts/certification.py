"""The certification record: did provider P pass contract C, with the evidence, until when.

Plain pydantic values with an exact JSON round trip
(``Certification.model_validate_json(c.model_dump_json()) == c``), so that the router can store
them as JSON and a cassette replay yields the same record as the live run (timestamps come from
the `now` given to `certify`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    JsonValue,
    ValidationError,
    model_validator,
)

from jobrouter.providers.base import MarkerTokens, Message

Verdict = Literal["pass", "fail", "unverified"]
"""``unverified``: the check could not be performed. It is never a pass: it blocks
certification unless the provider's config names a waiver for that check."""

Seen = bool | Literal["unknown"]
"""What the provider's own prompt count implies it read: true, false, or ``"unknown"`` when the
count cannot tell (no usage, an estimate too coarse, a format not reproduced)."""

MarkersTokenization = Literal["measured", "configured, not measured"]


class Validity(StrEnum):
    """What a certification record says of a provider for a contract at a given time (a cell of
    the certification matrix). Only `pass` lets the router route there."""

    PASS = "pass"
    FAIL = "fail"  # certified, and a check failed
    UNVERIFIED = "unverified"  # a check could not be performed and no waiver covers it
    STALE = "stale"  # the contract or the provider changed since, or an older jobrouter's record
    EXPIRED = "expired"
    MISSING = "missing"  # never certified
    SUSPENDED = "suspended"  # passed, then taken out of the pool by its live answers

    @property
    def valid(self) -> bool:
        return self is Validity.PASS

    @property
    def outdated(self) -> bool:
        """The record (if any) speaks of another contract, provider or time: certify again; its
        cases' own verdicts say nothing of now."""
        return self in _OUTDATED


_OUTDATED = frozenset({Validity.STALE, Validity.EXPIRED, Validity.MISSING})


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Failure(_Record):
    """One failed check, as data. `check` is one of ``rendering``, ``json``, ``schema``,
    ``behaviour: <check type>``, ``agreement``, ``provider`` (no answer: an error of the
    provider) or ``cases`` (a contract with none); `run` is ``"2/3"`` for one run's failure and
    empty for the case's own. Printed with the check first: ``schema: run 2/3: ...``."""

    check: str
    detail: str
    run: str = ""

    def __str__(self) -> str:
        where = f"run {self.run}: " if self.run else ""
        return f"{self.check}: {where}{self.detail}"


class RenderingEvidence(_Record):
    """How the case's prompt rendered, how the provider receives it, and what it counted.

    `prompt_tokens` is the product's count of what the contract meant to send, through the
    provider's chat format and tokenizer (`tokenizer`; `count_basis` says whether it is exact,
    an estimate or a lower bound); `reported_prompt_tokens` is what the provider reported for
    each run (None: no usage). `tolerance` is the allowed difference and `diagnosis` what a
    difference beyond it suggests. `verdict` is the rendering check's; `unverified` says what
    could not be checked, and `waived` the waiver (from the provider's config) that accepted it.

    The system text, three facts kept apart so that none stands in for another:
    `system_sent` (the request carried one), `system_rendered` (it is in the configured chat
    format's rendering; None when no rendering is known: a hosted API, a format not reproduced)
    and `system_seen` (what the provider's count implies it read: true, false or "unknown").

    The markers: `markers` holds the configured chat format's control markers with their ids;
    `markers_tokenization` is ``measured`` when the ids come from the provider's own tokenizer,
    else ``configured, not measured``. `rendering_seen` is what the provider's count implies of
    the configured rendering as a whole (true: every count within the tolerance of an exact
    count; false: a count beyond it; "unknown": no exact count to compare). `control_tokens_special`
    is True only while no count contradicts the rendering: markers that are control tokens of
    the tokenizer prove nothing of a server that renders other markers.

    Records written before these fields had one `system_present` (sent, for a hosted API;
    rendered, for a llama.cpp one); they still load, with `system_seen` "unknown".
    """

    ok: bool
    verdict: Verdict = "unverified"
    messages: tuple[Message, ...] = ()
    error: str | None = None
    inspected: bool = False
    accepted_roles: tuple[str, ...] | None = None
    system_sent: bool = False
    system_rendered: bool | None = None
    system_seen: Seen = "unknown"
    prompt_tokens: int | None = None
    tokenizer: str | None = None
    count_basis: str | None = None
    prompt_tokens_without_system: int | None = None
    reported_prompt_tokens: tuple[int | None, ...] = ()
    tolerance: int | None = None
    diagnosis: str | None = None
    rendering_seen: Seen = "unknown"
    context_window: int | None = None
    control_tokens_special: bool | None = None
    markers: tuple[MarkerTokens, ...] = ()
    markers_tokenization: MarkersTokenization = "configured, not measured"
    rendered: str | None = None
    unverified: tuple[str, ...] = ()
    waived: str | None = None
    notes: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _from_system_present(cls, data: Any) -> Any:
        """A record of before the split (one `system_present`) read into the new fields."""
        if not isinstance(data, dict) or "system_present" not in data:
            return data
        data = dict(data)
        present = data.pop("system_present")
        roles = [m.get("role") if isinstance(m, dict) else m.role for m in data.get("messages", ())]
        data.setdefault("system_sent", "system" in roles)
        data.setdefault("system_rendered", present if data.get("rendered") is not None else None)
        return data


class CaseEvidence(_Record):
    """One golden case: its verdict, rendering, the parsed outputs of its runs, every failure
    (`Failure`, the failing check as data), agreement.

    `verdict` is ``fail`` when any check failed, ``unverified`` when none failed but a check
    could not be performed (`unverified` names it), else ``pass``. `passed` is True for
    ``pass``, and for ``unverified`` when every unverified check is waived in the provider's
    config (the certification's `waivers`). `outputs` holds the parsed output of each run that
    returned one (JSON values).

    Stability, measured on the case's identical requests (the runs send byte-identical bodies;
    at temperature 0 a provider may still answer them differently): `distinct_answers` is how
    many different raw answers the runs got, `differing_runs` how many runs differ from the
    most common one, `agreement_margin` the agreement share minus `min_agreement` (0: passed
    with nothing to spare, negative: failed by that much), `finish_reasons` each run's
    finish reason as the provider reported it (``length``: cut off at `max_tokens`; None: no
    answer, or none reported). None (or empty) in records made before these fields.
    """

    name: str
    passed: bool
    verdict: Verdict
    rendering: RenderingEvidence
    runs: int
    outputs: tuple[JsonValue, ...] = ()
    failures: tuple[Failure, ...] = ()
    unverified: tuple[str, ...] = ()
    agreement: float | None = None
    agreement_margin: float | None = None
    distinct_answers: int | None = None
    differing_runs: int | None = None
    finish_reasons: tuple[str | None, ...] = ()

    @property
    def stability(self) -> str | None:
        """The stability fields in one line (None in records made before them)."""
        if self.distinct_answers is None:
            return None
        reasons = ", ".join(str(reason) for reason in self.finish_reasons)
        margin = "n/a" if self.agreement_margin is None else f"{self.agreement_margin:+.2f}"
        return (
            f"{self.distinct_answers} distinct answers, {self.differing_runs} of {self.runs} "
            f"runs differ from the most common; agreement margin {margin}; finish reasons "
            f"[{reasons}]"
        )

    @property
    def cut_off_runs(self) -> int:
        """Runs the provider stopped at `max_tokens` (finish reason ``length``)."""
        return sum(reason == "length" for reason in self.finish_reasons)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The distinct failing checks, in order of first failure."""
        return tuple(dict.fromkeys(f.check for f in self.failures))


class Certification(_Record):
    """Provider `provider` passed (or not) contract `contract` at `certified_at`."""

    provider: str
    provider_fingerprint: str
    contract: str
    contract_version: int
    contract_fingerprint: str
    passed: bool
    cases: tuple[CaseEvidence, ...]
    failures: tuple[Failure, ...] = ()  # not tied to a case (e.g. a contract with no cases)
    waivers: dict[str, str] = {}  # check -> reason: the provider config's accepted unverified
    certified_at: AwareDatetime
    expires_at: AwareDatetime

    @classmethod
    def parse_stored(cls, text: str) -> Certification | None:
        """A stored record, or None when an older version wrote it (failures as plain lines,
        no verdicts): such a record proves nothing this version checks; certify again."""
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None

    @property
    def verdict(self) -> Verdict:
        """``fail`` if anything failed, else ``unverified`` if any case is, else ``pass``."""
        if self.failures or any(case.verdict == "fail" for case in self.cases):
            return "fail"
        if any(case.verdict == "unverified" for case in self.cases):
            return "unverified"
        return "pass"

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The distinct failing checks over all cases, in order of first failure."""
        checks = [f.check for f in self.failures]
        checks += [check for case in self.cases for check in case.failed_checks]
        return tuple(dict.fromkeys(checks))

    @property
    def unverified_checks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for case in self.cases for c in case.unverified))

    @property
    def first_failure(self) -> str | None:
        """The first failure (check first), prefixed with its case name, or None."""
        if self.failures:
            return str(self.failures[0])
        for case in self.cases:
            if case.failures:
                return f"{case.name}: {case.failures[0]}"
        for case in self.cases:
            if not case.passed:
                reasons = "; ".join(case.rendering.unverified) or "not verified"
                return f"{case.name}: unverified {', '.join(case.unverified)}: {reasons}"
        return None

    def is_valid_for(
        self, contract_fingerprint: str, provider_fingerprint: str, now: datetime
    ) -> tuple[bool, str]:
        """Whether this record certifies that provider for that contract at `now`, and why
        (`validity_for`, with the validity as a flag)."""
        validity, reason = self.validity_for(contract_fingerprint, provider_fingerprint, now)
        return validity.valid, reason

    def validity_for(
        self, contract_fingerprint: str, provider_fingerprint: str, now: datetime
    ) -> tuple[Validity, str]:
        """What this record says of that provider for that contract at `now`, and why.

        Reasons, in the order checked: ``stale: contract changed``, ``stale: provider changed``,
        ``expired at <iso time>``, ``failed: <first failure>``, ``unverified: <check>: <why>``;
        when valid, ``valid until <iso time>`` (plus the waivers it relies on).
        """
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware (e.g. datetime.now(UTC))")
        if contract_fingerprint != self.contract_fingerprint:
            return Validity.STALE, "stale: contract changed"
        if provider_fingerprint != self.provider_fingerprint:
            return Validity.STALE, "stale: provider changed"
        if now >= self.expires_at:
            return Validity.EXPIRED, f"expired at {self.expires_at.isoformat()}"
        if not self.passed:
            if self.verdict == "unverified":
                return (Validity.UNVERIFIED, f"unverified: {self.first_failure or 'not verified'}")
            return Validity.FAIL, f"failed: {self.first_failure or 'no passing evidence'}"
        waived = "".join(
            f"; waived: {check} unverified ({reason})"
            for check, reason in self.waivers.items()
            if check in self.unverified_checks
        )
        return Validity.PASS, f"valid until {self.expires_at.isoformat()}{waived}"
