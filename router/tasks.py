"""A task as the engine runs it: its policy, how a job's input becomes a provider request, and
how an output is judged before it may win (the contract's schema and checks, at routing time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrouter.models import Job, canonical_json
from jobrouter.policy import TaskPolicy
from jobrouter.providers import CompletionRequest, Message
from jobrouter.store.live_watch import LiveVerdict

# Keys of a job's `params` that reach the provider request (the door refuses all others).
ALLOWED_PARAMS = frozenset({"max_tokens"})

if TYPE_CHECKING:
    from jobrouter.contracts import Contract


@dataclass(frozen=True)
class TaskRuntime:
    name: str
    policy: TaskPolicy
    deadline_s: float | None
    attempt_timeout_s: float | None
    contract: Contract | None = None
    contract_fingerprint: str | None = None
    watched: bool = True  # `[certification.watch] enabled`: answers kept as live evidence
    on_budget: str = "fail"  # `[tasks.NAME] on_budget`: "fail" or "wait" (jobrouter.spending)

    def build_request(
        self, input: Mapping[str, Any], params: Mapping[str, Any]
    ) -> CompletionRequest:
        """The provider request of a job (no timeout, no job labels: `for_attempt` adds them).
        Only the params the door admits reach it (`jobrouter.door.ALLOWED_PARAMS`): a stored job
        from before the door cannot smuggle certified sampling into a call."""
        admitted = {key: params[key] for key in ALLOWED_PARAMS if key in params}
        if self.contract is None:
            # A task without a contract sends its input as the user message, as JSON.
            message = Message(role="user", content=canonical_json(input))
            return CompletionRequest(
                messages=(message,),
                max_tokens=admitted.get("max_tokens"),
                labels={"task": self.name},
            )
        from jobrouter.contracts import build_request

        return build_request(self.contract, input, params=admitted, labels={"task": self.name})

    @staticmethod
    def for_attempt(
        request: CompletionRequest, job: Job, timeout: float | None
    ) -> CompletionRequest:
        return request.model_copy(
            update={"timeout": timeout, "labels": {**request.labels, "job_id": job.id}}
        )

    def output_problems(self, output: Any) -> list[str]:
        """Why an output may not win: schema errors and failed contract checks (empty: fine)."""
        if self.contract is None:
            return []
        from jobrouter.contracts import run_checks, validate_output

        problems = list(validate_output(self.contract, output))
        problems += [str(failure) for failure in run_checks(self.contract.checks, output)]
        return problems

    def live_verdict(
        self,
        attempt_id: str,
        provider: str,
        failure: str | None,
        *,
        request: CompletionRequest | None,
        prompt_tokens: int | None,
    ) -> LiveVerdict | None:
        """What an answer shows of its provider for this task's contract (None: no contract to
        hold it to): `failure` says which check broke and how, None for an answer that held;
        the size of what was sent and the provider's count of it, which the leader's fold
        compares with what certification saw (router/watch.py). None as well when nobody
        folds them (`[certification.watch] enabled = false`): they would only pile up."""
        if self.contract is None or not self.watched:
            return None
        chars = None if request is None else sum(len(m.content) for m in request.messages)
        return LiveVerdict(
            attempt_id=attempt_id,
            provider=provider,
            contract=self.contract.name,
            failed=failure is not None,
            failure=failure,
            prompt_tokens=prompt_tokens,
            prompt_chars=chars,
        )
