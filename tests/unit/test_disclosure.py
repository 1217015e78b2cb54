"""`jobrouter.disclosure`: the owner's summary holds none of the provider's words; the detail, and
an answer that did not win, are for operators only (issue 14)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobrouter.disclosure import disclose, provider_failure
from jobrouter.models import Attempt, Job
from jobrouter.policy import Finish, TaskPolicy, decide
from jobrouter.providers.errors import (
    InvalidOutput,
    NotSent,
    OutcomeUnknown,
    ProviderError,
    Redirected,
    Rejected,
)
from jobrouter.states import AttemptState, JobState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = "upstream says: quota for org-7 exhausted, see https://example.invalid/x"


def _attempt(state: AttemptState, **fields: object) -> Attempt:
    return Attempt.model_validate(
        {
            "id": "a1",
            "job_id": "j1",
            "seq": 1,
            "provider": "p",
            "state": state,
            "started_at": T0,
            **fields,
        }
    )


@pytest.mark.parametrize(
    ("error", "summary"),
    [
        (
            NotSent(WORDS, provider="p", status=401),
            "provider p refused the request (HTTP 401) and did not act on it",
        ),
        (NotSent(WORDS, provider="p"), "provider p was not reached: nothing was sent"),
        (
            Rejected(WORDS, provider="p", status=502),
            "provider p answered with an error (HTTP 502) and may have acted",
        ),
        (
            InvalidOutput(WORDS, provider="p", check="json", text=WORDS),
            "provider p answered with output the task cannot use (check: json)",
        ),
        (
            OutcomeUnknown(WORDS, provider="p", status=504),
            "no answer came back from provider p (HTTP 504): the request may have run",
        ),
        (
            OutcomeUnknown(WORDS, provider="p"),
            "no answer came back from provider p: the request may have run",
        ),
        (
            Redirected(WORDS, provider="p", status=302, location="https://o.example:8443/v?k=s"),
            "provider p answered with a redirect (HTTP 302) to https://o.example:8443/v, "
            "not followed, and may have acted",
        ),
        # A port out of range: urllib raises ValueError reading it. Mutant: disclosure._where's
        # `except ValueError` re-raising (the summary raised inside the attempt's error
        # handling: the attempt stayed `started` until its lease made it `unknown`), seen failing.
        (
            Redirected(WORDS, provider="p", status=307, location="https://o.example:99999/v"),
            "provider p answered with a redirect (HTTP 307) to a Location that is no URL, "
            "not followed, and may have acted",
        ),
    ],
)
def test_a_provider_failure_is_summarized_from_its_class_never_its_words(
    error: ProviderError, summary: str
) -> None:
    assert provider_failure(error) == summary
    assert "upstream" not in summary and WORDS in str(error)  # the words stay in the detail


def test_an_owner_is_not_shown_the_detail_nor_an_answer_that_did_not_win() -> None:
    kept = _attempt(
        AttemptState.UNKNOWN, error="provider p answered ...", error_detail=WORDS, output=WORDS
    )
    won = _attempt(AttemptState.SUCCEEDED, output={"text": "hi"})
    job = Job(
        id="j1",
        owner="o",
        idempotency_key="k",
        fingerprint="f",
        task="t",
        input={},
        params={},
        state=JobState.FAILED,
        version=3,
        error="summary",
        error_detail=WORDS,
        created_at=T0,
        updated_at=T0,
    )
    owner_sees = disclose(kept, operator=False)
    assert (owner_sees.error, owner_sees.error_detail, owner_sees.output) == (
        "provider p answered ...",
        None,
        None,
    )
    assert disclose(won, operator=False).output == {"text": "hi"}  # a result is the owner's
    assert disclose(job, operator=False) == job.model_copy(update={"error_detail": None})
    assert disclose(job, operator=True) is job and disclose(kept, operator=True) is kept


def test_a_failed_job_summarizes_its_attempts_and_keeps_their_detail_apart() -> None:
    failed = _attempt(
        AttemptState.FAILED, error_kind="not_sent", error="provider p refused", error_detail=WORDS
    )
    decision = decide(
        TaskPolicy(providers=("p",), exclusive=False),
        [failed],
        {},
        now=T0.timestamp(),
        deadline_at=None,
    )
    assert isinstance(decision, Finish) and decision.state is JobState.FAILED
    assert decision.error.endswith("attempts: p: not_sent provider p refused")
    assert decision.detail is not None and decision.detail.endswith(f"not_sent {WORDS}")
    assert "upstream" not in decision.error
