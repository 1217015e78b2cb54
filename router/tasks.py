"""A task as the engine runs it: its policy, how a job's input becomes a provider request, and
how an output is judged before it may win (the contract's schema and checks, at routing time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from providers import CompletionRequest, Message
from router.models import Job, canonical_json
from router.policy import TaskPolicy

if TYPE_CHECKING:
    from contracts import Contract


@dataclass(frozen=True)
class TaskRuntime:
    name: str
    policy: TaskPolicy
    deadline_s: float | None
    attempt_timeout_s: float | None
    contract: Contract | None = None
    contract_fingerprint: str | None = None

    def build_request(self, job: Job, timeout: float | None) -> CompletionRequest:
        labels = {"job_id": job.id, "task": job.task}
        if self.contract is None:
            # A task without a contract sends its input as the user message, as JSON.
            message = Message(role="user", content=canonical_json(job.input))
            return CompletionRequest(messages=(message,), timeout=timeout, labels=labels)
        from contracts import build_request

        request = build_request(self.contract, job.input, params=job.params, timeout=timeout)
        return request.model_copy(update={"labels": labels})

    def output_problems(self, output: Any) -> list[str]:
        """Why an output may not win: schema errors and failed contract checks (empty: fine)."""
        if self.contract is None:
            return []
        from contracts import run_checks, validate_output

        problems = list(validate_output(self.contract, output))
        problems += [str(failure) for failure in run_checks(self.contract.checks, output)]
        return problems
