"""Golden probes (issue 27): what live answers cannot show. A valid JSON with a wrong value
passes every live check, so the leader sends, on a schedule, one golden case of a contract to
each certified provider and judges the answer as certification did (schema, checks, the
case's expectations). A wrong answer is a verdict like a live one, marked a probe; the fold
(router/watch.py) suspends the pair at once.

    leader, every minute (or every interval, when shorter):
        each provider with a target whose probe is due (`probe_schedule`, claimed by CAS):
        its next certified, unsuspended contract (in turn), that contract's next stable case
        ─> provider.complete ─> verdict (`live_verdicts`, source 'probe')

The cap is the fleet's and durable: a probe is sent only by the process that moved the
provider's `next_at` on by one interval (3600 / [certification.watch] probes_per_hour seconds)
from a time already past, in the store. So a provider gets at most `probes_per_hour` calls an
hour however many workers or replicas run, across leader changes and even with two leaders at
once, and a new leader goes on with the turns where the last one stopped. Only a case whose
every certification run passed is sent (a case certification saw vary would suspend on
noise). A probe that got no answer (timeout, 5xx) could not check: logged and counted as
such, never a pass nor a failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client import Counter

from jobrouter.metrics import REGISTRY
from jobrouter.providers import Provider
from jobrouter.providers.errors import InvalidOutput, ProviderError
from jobrouter.providers.redact import scrub_output
from jobrouter.store.certifications import CertificationStore
from jobrouter.store.live_watch import LiveVerdict
from jobrouter.tasks import TaskRuntime

if TYPE_CHECKING:
    from jobrouter.contracts import Case, Certification, Contract

log = logging.getLogger("jobrouter.probes")
PROBE_TIMEOUT_S = 60.0

PROBES = Counter(
    "jobrouter_probes",
    "Golden probes sent by the leader, by provider, contract and outcome (pass, fail, "
    "unchecked: no answer to judge).",
    ["provider", "contract", "outcome"],
    registry=REGISTRY,
)


@dataclass(frozen=True)
class Target:
    provider: str
    contract: Contract
    cases: tuple[Case, ...]  # the stable ones: every certification run passed


@dataclass
class Prober:
    """The leader's probes; when each provider's is due, and its turn, are the store's."""

    store: CertificationStore
    tasks: Mapping[str, TaskRuntime]
    providers: Mapping[str, Provider]
    interval_s: float  # between two probes of one provider: 3600 / probes_per_hour
    clock: Callable[[], float] = field(default=time.time)

    async def round(self) -> int:
        """A probe to each provider that has a target and whose probe is due; returns how many
        were sent."""
        targets = await self._targets()
        sent = 0
        for provider, choices in sorted(targets.items()):
            turn = await self.store.claim_probe(
                provider, now=self.clock(), interval_s=self.interval_s
            )
            if turn is None:  # not due, or another leader's round took this one
                continue
            target = choices[turn % len(choices)]
            case = target.cases[(turn // len(choices)) % len(target.cases)]
            try:
                verdict = await probe(self.providers[provider], target.contract, case)
            except Exception:  # a provider's bug must not keep the others from their probe
                PROBES.labels(provider, target.contract.name, "unchecked").inc()
                log.exception("golden probe %s of %s failed unexpectedly", case.name, provider)
                continue
            if verdict is not None:
                await self.store.live.record_probe(verdict)
            sent += 1
        return sent

    async def _targets(self) -> dict[str, list[Target]]:
        from jobrouter.contracts import Certification

        records = {
            (row.provider, row.contract): Certification.parse_stored(row.record)
            for row in await self.store.list_certifications()
        }
        suspended = await self.store.list_suspensions()
        now = datetime.now(UTC)
        targets: dict[str, list[Target]] = {}
        seen: set[tuple[str, str]] = set()
        for task in self.tasks.values():
            if task.contract is None or task.contract_fingerprint is None:
                continue
            for name in task.policy.providers:
                key = (name, task.contract.name)
                cert, provider = records.get(key), self.providers.get(name)
                if key in seen or key in suspended or cert is None or provider is None:
                    continue
                seen.add(key)
                valid, _ = cert.is_valid_for(task.contract_fingerprint, provider.fingerprint, now)
                cases = stable_cases(task.contract, cert)
                if valid and cases:
                    targets.setdefault(name, []).append(Target(name, task.contract, cases))
        return targets


def stable_cases(contract: Contract, cert: Certification) -> tuple[Case, ...]:
    """The contract's cases whose every certification run passed."""
    steady = {
        case.name
        for case in cert.cases
        if case.passed and not case.failures and (case.agreement is None or case.agreement >= 1)
    }
    return tuple(case for case in contract.cases if case.name in steady)


async def probe(provider: Provider, contract: Contract, case: Case) -> LiveVerdict | None:
    """Send one golden case and judge the answer; None when there was none to judge."""
    from jobrouter.contracts import build_request, check_output

    request = build_request(contract, case.input, labels={"probe": case.name})
    request = request.model_copy(update={"timeout": PROBE_TIMEOUT_S})
    began = time.perf_counter()
    failure: str | None
    try:
        completion = await provider.complete(request)
    except InvalidOutput as exc:
        failure = f"{case.name}: {exc.check}: {exc}"
    except (ProviderError, TimeoutError) as exc:
        PROBES.labels(provider.name, contract.name, "unchecked").inc()
        log.warning(
            "golden probe %s of %s x %s could not check: %s: %s",
            case.name,
            provider.name,
            contract.name,
            type(exc).__name__,
            exc,
        )
        return None
    else:
        problems = check_output(contract, scrub_output(completion.output), extra=case.expect)
        failure = f"{case.name}: {'; '.join(problems[:3])}" if problems else None
        usage = completion.usage
        log.info(
            "golden probe %s of %s x %s: %s in %.0f ms (%s prompt + %s completion tokens, "
            "cost %s USD)",
            case.name,
            provider.name,
            contract.name,
            "wrong" if failure else "right",
            (time.perf_counter() - began) * 1000,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cost_usd,
        )
    PROBES.labels(provider.name, contract.name, "fail" if failure else "pass").inc()
    return LiveVerdict(
        attempt_id=f"probe:{case.name}",
        provider=provider.name,
        contract=contract.name,
        failed=failure is not None,
        failure=failure,
        probe=True,
    )
