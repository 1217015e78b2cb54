"""The eligibility gate: which providers may get a new attempt for a task now, and why not.

A provider is eligible when it is configured, holds a valid certification for the task's
contract (passed, fingerprints of contract and provider unchanged, not expired) when
certification is required, and its circuit lets calls through. Refusal reasons go on the job's
event log; an uncertified provider is never called, however the others fare (I5).
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from jobrouter.breaker import Breakers
from jobrouter.policy import Eligibility
from jobrouter.providers import Provider
from jobrouter.store.certifications import CertificationStore
from jobrouter.store.live_watch import Suspension
from jobrouter.tasks import TaskRuntime

if TYPE_CHECKING:
    from jobrouter.contracts import Certification
    from jobrouter.contracts.certification import Validity

CERTIFICATION_REFRESH_S = 2.0


class Gate:
    def __init__(
        self,
        store: CertificationStore,
        providers: Mapping[str, Provider],
        breakers: Breakers,
        *,
        required: bool,
        config_file: Path | None = None,
    ) -> None:
        self.store = store
        self.config_file = config_file
        self.providers = providers
        self.breakers = breakers
        self.required = required
        self._records: dict[tuple[str, str], Certification] = {}
        self._suspended: dict[tuple[str, str], Suspension] = {}
        self._read_at = float("-inf")
        self._reading: asyncio.Future[None] | None = None
        self._reading_after = 0  # the `_forgotten` count the read in flight started after
        self._forgotten = 0  # times this process changed what is read: reads before are old

    async def eligibility(self, task: TaskRuntime) -> dict[str, Eligibility]:
        verdicts: dict[str, Eligibility] = {}
        for name in task.policy.providers:
            verdict = await self._certified(task, name)
            if verdict.ok:
                verdict = await self.breakers.verdict(name)
            verdicts[name] = verdict
        return verdicts

    def forget(self) -> None:
        """Certifications changed in this process: read them again before the next decision."""
        self._read_at = float("-inf")
        self._forgotten += 1

    async def _certified(self, task: TaskRuntime, name: str) -> Eligibility:
        provider = self.providers.get(name)
        if provider is None:
            return Eligibility(False, "not configured in [providers]")
        if task.contract is None or not self.required:
            return Eligibility(True)
        contract = task.contract.name
        certification = (await self._certifications()).get((name, contract))
        if certification is None:
            command = certify_command(name, contract, self.config_file)
            return Eligibility(
                False, f"not certified for contract {contract!r}; certify it: {command}"
            )
        validity, reason = certification.validity_for(
            task.contract_fingerprint or "", provider.fingerprint, datetime.now(UTC)
        )
        suspension = self._suspended.get((name, contract))
        if validity.valid and suspension is not None:
            command = certify_command(name, contract, self.config_file)
            return Eligibility(False, suspended_reason(contract, suspension, command))
        if validity.valid:
            return Eligibility(True)
        # Made only for a refusal: quoting it costs more than the rest of a valid verdict.
        command = certify_command(name, contract, self.config_file)
        return Eligibility(
            False,
            f"certification for {contract!r} {reason}; {_fix(validity, certification, command)}",
        )

    async def _certifications(self) -> dict[tuple[str, str], Certification]:
        """Parsed once per refresh, not per decision: a record carries every case's evidence.
        One read however many deciders find them due at once (each is a transaction on
        PostgreSQL)."""
        if time.monotonic() - self._read_at >= CERTIFICATION_REFRESH_S:
            if self._reading is None or self._reading_after != self._forgotten:
                self._reading_after = self._forgotten
                self._reading = asyncio.ensure_future(self._read(self._forgotten))
            await asyncio.shield(self._reading)
        return self._records

    async def _read(self, forgotten: int) -> None:
        from jobrouter.contracts import Certification

        try:
            rows = await self.store.list_certifications()
            parsed = {
                (row.provider, row.contract): Certification.parse_stored(row.record) for row in rows
            }
            suspended = await self.store.list_suspensions()
            # Imported here: a router that never decides (the CLI's) loads no metrics registry.
            from jobrouter.metrics import SUSPENDED

            for provider, contract in self._suspended.keys() | suspended.keys():
                SUSPENDED.labels(provider=provider, contract=contract).set(
                    int((provider, contract) in suspended)
                )
            self._suspended = suspended
            self._records = {key: cert for key, cert in parsed.items() if cert is not None}
            if forgotten == self._forgotten:  # else a change here came after: read again
                self._read_at = time.monotonic()
        finally:
            if self._reading_after == forgotten:
                self._reading = None


def certify_command(provider: str, contract: str, config_file: Path | None) -> str:
    """The command that certifies the pair, runnable as printed: with --config when the config
    was not found by default (a job's reason is read far from the folder it was found in)."""
    quoted = f"--provider {shlex.quote(provider)} --contract {shlex.quote(contract)}"
    command = f"jobrouter contracts run {quoted}"
    if config_file is not None:
        command += f" --config {shlex.quote(str(config_file))}"
    return command


def suspended_reason(contract: str, suspension: Suspension, command: str) -> str:
    """Why a certified provider gets no attempt, and the two ways back: a passing run, or an
    operator's recorded word."""
    reinstate = command.replace("contracts run", "contracts reinstate", 1)
    return (
        f"suspended for contract {contract!r} by its live answers: {suspension.reason}; "
        f"fix the provider, then certify it again: {command} "
        f"(or, checked by hand: {reinstate} --reason TEXT)"
    )


def _fix(validity: Validity, certification: Certification, command: str) -> str:
    """What to do: certify again only helps a record that speaks of another time, contract or
    provider; a failed or unverified one needs its check fixed first."""
    from jobrouter.contracts.certification import Validity

    if validity.outdated:
        return f"certify it: {command}"
    checks = ", ".join(certification.failed_checks or certification.unverified_checks)
    if validity is Validity.UNVERIFIED:
        return (
            f"check not performed: {checks}; make it checkable or name a waiver in the "
            f"provider's accept_unverified, then certify again: {command}"
        )
    return (
        f"failing checks: {checks}; certifying again will not pass until the provider, its "
        f"config or the contract changes for them; then: {command}"
    )
