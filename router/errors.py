"""The router's domain errors, one hierarchy:

    JobRouterError                  base: every error the router raises on purpose
    ├── ConfigError                 a configuration file or value is wrong (file, key, reason)
    │   └── UnknownTask             submit or a check named a task not configured (task, known)
    ├── IdempotencyConflict         same (owner, key), different payload (owner, key, job_id)
    ├── JobRefused                  submit refused at the door, nothing written (field, value,
    │   │                           reason, hint)
    │   └── BudgetExhausted         an owner, task or global budget covering it has nothing
    │                               left in its period (budget, side, limit, spent, retry_after)
    ├── BudgetCrossed               an attempt's worst case would cross a budget (budget, side,
    │                               limit, charged): the attempt is not started
    ├── BudgetUnheld                a budget cannot hold an attempt's worst case (budget,
    │                               reason, hint): the attempt is not started
    ├── JobNotFound                 no such job for this owner (job_id)
    ├── AttemptNotFound             no such attempt (attempt_id)
    ├── InvalidTransition           a state change the tables forbid (entity, id, src, dst)
    ├── ResolutionInvalid           a resolution that cannot be applied as given (attempt_id,
    │                               field, reason): `succeeded` without a result, say
    ├── NoEligibleProvider          no provider may run this job (job_id, reasons per provider)
    ├── InvalidText                 an id, key or name the database cannot hold (field, reason)
    │   └── InvalidIdentity         an owner that is empty or only spaces, or holds a NUL
    │       └── InvalidIdempotencyKey   a key that is empty, longer than 255 characters,
    │                               or holds a NUL (HTTP 400, the header's fault)
    ├── StoreError                  the database could not be used (url, reason, transient)
    ├── ListingError                a job listing asked for what cannot be answered (reason)
    ├── SpendQueryInvalid           a spend report asked as it cannot be answered (field,
    │                               value, reason, hint): an unknown group, a bad date
    ├── ReinstateRefused            `contracts reinstate` refused as asked (field, reason)
    ├── LeaseLost                   the leader's lease is no longer its own (worker_id, term):
    │                               another took it, or it expired; never reaches a caller
    ├── WaitTimeout                 `Router.wait` gave up (job_id, state, timeout); also a
    │                               builtin `TimeoutError`, which callers caught before
    └── RouterClosed                the router was used after close()

Every class carries what an HTTP answer says of it as data: `status` (the HTTP status) and
`slug` (the problem type, `urn:jobrouter:problem:<slug>`); `jobrouter.http.problems` maps by
them and never by type. A few instances refine them from their own fields (a `JobRefused`'s
kind, a broken `StoreError`). Errors that never reach a caller on purpose keep the base's
500 `internal`.

Provider failures are not here: they are `jobrouter.providers.errors.ProviderError` values, recorded
on attempts by kind; they never escape the engine as exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping


class JobRouterError(Exception):
    """Base of every error the router raises on purpose. `status` and `slug` are its HTTP
    answer (status code, problem type); the base's are what an unexpected error gets."""

    status: int = 500
    slug: str = "internal"
    # The fields an HTTP problem answer carries as members beside its detail (RFC 9457
    # extensions), by attribute name: what a client acts on without parsing the text.
    members: tuple[str, ...] = ()


class ConfigError(JobRouterError):
    def __init__(self, reason: str, *, file: str | None = None, key: str | None = None) -> None:
        where = ": ".join(part for part in (file, key) if part)
        super().__init__(f"{where}: {reason}" if where else reason)
        self.file = file
        self.key = key
        self.reason = reason


class UnknownTask(ConfigError):
    """A task name no `[tasks.<name>]` configures: `known` lists the configured ones."""

    status = 422
    slug = "unknown-task"

    def __init__(self, task: str, known: list[str]) -> None:
        listed = ", ".join(known) or "none"
        super().__init__(f"unknown task {task!r}; configured tasks: {listed}", key=f"tasks.{task}")
        self.task = task
        self.known = list(known)


class IdempotencyConflict(JobRouterError):
    status = 422
    slug = "idempotency-key-reused"
    members = ("job_id", "idempotency_key")

    def __init__(self, *, owner: str, idempotency_key: str, job_id: str) -> None:
        super().__init__(
            f"idempotency key {idempotency_key!r} of owner {owner!r} was already used for job "
            f"{job_id} with a different task, input or params; use a new key for a new intent, "
            "or resubmit the original payload to get that job back"
        )
        self.owner = owner
        self.idempotency_key = idempotency_key
        self.job_id = job_id


class JobRefused(JobRouterError):
    """`submit` refused the work before writing anything: `field` is where (`input.product`,
    `params.temperature`), `value` a short rendering of what was sent, `reason` what is wrong
    and `hint` what to do. `slug` names the kind of refusal (the HTTP problem type);
    `errors` lists every problem found when there are several (schema errors)."""

    status = 422
    slug = "job-refused"
    members: tuple[str, ...] = ("field", "errors")

    def __init__(
        self,
        *,
        field: str,
        value: str,
        reason: str,
        hint: str,
        slug: str = "job-refused",
        errors: list[str] | None = None,
    ) -> None:
        super().__init__(f"{field}: {reason} (got {value}); {hint}")
        self.field = field
        self.value = value
        self.reason = reason
        self.hint = hint
        self.slug = slug
        self.errors = errors or [f"{field}: {reason}"]


class BudgetExhausted(JobRefused):
    """A submit refused because `budget` has spent (reserved and actual) `spent` of its
    `limit` on `side` (`usd` or `tokens`) in its current period, which ends in `retry_after`
    seconds: nothing was written. Over HTTP a 429 with Retry-After; in the CLI its own code."""

    status = 429
    slug = "budget-exhausted"
    members = ("budget", "side", "limit", "spent")

    def __init__(
        self, *, budget: str, side: str, limit: float, spent: float, retry_after: float
    ) -> None:
        unit = "USD" if side == "usd" else "tokens"
        super().__init__(
            field="budget",
            value=budget,
            reason=(
                f"budget {budget} has nothing left this period: {spent:g} of its {limit:g} "
                f"{unit} spent or reserved"
            ),
            hint=(
                f"submit again when the period ends (in {retry_after:.0f} s), or raise "
                f"[budgets.{budget}] {side}"
            ),
            slug="budget-exhausted",
        )
        self.args = (f"{self.reason}; {self.hint}",)  # the budget is named once, not as "got"
        self.budget = budget
        self.side = side
        self.limit = limit
        self.spent = spent
        self.retry_after = retry_after


class BudgetCrossed(JobRouterError):
    """An attempt's worst case would cross `budget`'s cap on `side` (`usd` or `tokens`):
    `limit` is the cap, `charged` what the budget's period holds already. Raised by the store
    before the attempt row is written: nothing was started or charged."""

    def __init__(self, *, budget: str, side: str, limit: float, charged: float) -> None:
        super().__init__(
            f"budget {budget}: this attempt's worst case would cross its {side} cap of "
            f"{limit:g} ({charged:g} charged in the period)"
        )
        self.budget = budget
        self.side = side
        self.limit = limit
        self.charged = charged


class BudgetUnheld(JobRouterError):
    """A budget covers an attempt whose worst case cannot be reserved (`reason`: no
    `max_tokens`, an unknown price against a USD cap); `hint` is the fix.
    The attempt is not started: a budget is never passed uncharged."""

    def __init__(self, *, budget: str, reason: str, hint: str) -> None:
        super().__init__(f"budget {budget} cannot hold this attempt: {reason}; {hint}")
        self.budget = budget
        self.reason = reason
        self.hint = hint


class JobNotFound(JobRouterError):
    status = 404
    slug = "job-not-found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id}")
        self.job_id = job_id


class AttemptNotFound(JobRouterError):
    status = 404
    slug = "attempt-not-found"

    def __init__(self, attempt_id: str) -> None:
        super().__init__(f"no attempt {attempt_id}")
        self.attempt_id = attempt_id


class InvalidTransition(JobRouterError):
    status = 409
    slug = "invalid-transition"
    members = ("current_state",)

    def __init__(self, *, entity: str, entity_id: str, src: str, dst: str, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"{entity} {entity_id} cannot go from {src} to {dst}{detail}")
        self.entity = entity
        self.entity_id = entity_id
        self.src = src
        self.dst = dst

    @property
    def current_state(self) -> str:
        """Where the entity is: the state a 409 tells the client it is in."""
        return str(self.src)


class ResolutionInvalid(JobRouterError):
    """An operator's resolution of an `unknown` attempt refused before anything is written:
    `field` names what is wrong (`result`, `outcome`), `reason` says what it needs."""

    status = 422
    slug = "resolution-invalid"
    members = ("field", "errors")

    def __init__(self, *, attempt_id: str, field: str, reason: str) -> None:
        super().__init__(f"resolving attempt {attempt_id}: {field}: {reason}")
        self.attempt_id = attempt_id
        self.field = field
        self.reason = reason

    @property
    def errors(self) -> list[dict[str, str]]:
        return [{"where": self.field, "problem": self.reason}]


class NoEligibleProvider(JobRouterError):
    def __init__(self, *, task: str, reasons: Mapping[str, str], job_id: str | None = None) -> None:
        listed = "; ".join(f"{name}: {why}" for name, why in reasons.items()) or "none configured"
        super().__init__(f"no provider may run task {task!r}: {listed}")
        self.task = task
        self.job_id = job_id
        self.reasons = dict(reasons)


class InvalidText(JobRouterError):
    """A text value no row can hold as sent (a NUL character: PostgreSQL refuses it, SQLite
    would keep a key that no other backend could): refused before any statement runs."""

    status = 422
    slug = "text-invalid"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class InvalidIdentity(InvalidText):
    """The owner a job is submitted for cannot be one (`field` is `owner`): refused before
    the door, nothing written. Over HTTP the owner is the token's, so this is the Python
    API's and the CLI's; it answers as the `InvalidText` it refines."""


class InvalidIdempotencyKey(InvalidIdentity):
    """The idempotency key cannot be one (`field` is `idempotency_key`): empty, longer than
    `MAX_KEY_LENGTH`, or holding a NUL. Over HTTP it is the header's fault: a 400, as the IETF
    draft says of a malformed key."""

    status = 400
    slug = "idempotency-key-invalid"

    def __init__(self, reason: str) -> None:
        super().__init__("idempotency_key", reason)


class StoreError(JobRouterError):
    """`transient`: the cause may pass by itself (database down or stalled, disk full, file
    read-only, lock held): retry later. Not transient: a damaged file, a wrong URL."""

    status = 503
    slug = "unavailable"
    broken_slug = "store-broken"  # not transient: retrying will not help

    def __init__(self, reason: str, *, url: str | None = None, transient: bool = True) -> None:
        super().__init__(f"{url}: {reason}" if url else reason)
        self.url = url
        self.reason = reason
        self.transient = transient
        if not transient:  # an operator must repair the store first
            self.slug = self.broken_slug


class WaitTimeout(JobRouterError, TimeoutError):
    """`Router.wait` saw no end by its `timeout`: the job (`job_id`) is still `state`. Also a
    `TimeoutError`, as the builtin it replaces was: `except TimeoutError` keeps working. No
    HTTP route waits; if one did, the 504 says the job is still running."""

    status = 504
    slug = "wait-timeout"

    def __init__(self, *, job_id: str, state: str, timeout: float | None) -> None:
        super().__init__(f"job {job_id} is still {state} after {timeout}s")
        self.job_id = job_id
        self.state = state
        self.timeout = timeout


class RouterClosed(JobRouterError):
    status = 503
    slug = "unavailable"

    def __init__(self) -> None:
        super().__init__("the router is closed; open a new one with Router.open(...)")


class ListingError(JobRouterError):
    """A job listing that cannot be answered as asked: a malformed cursor, a limit out of range."""

    status = 422
    slug = "listing-invalid"


class SpendQueryInvalid(JobRouterError):
    """A spend report (`Router.spend`) asked for what cannot be answered, nothing read: `field`
    is the parameter (`by`, `since`, `until`), `value` what was sent, `reason` what is wrong
    and `hint` what to send instead. Over HTTP a 422 naming the parameter; in the CLI the
    usage exit code."""

    status = 422
    slug = "spend-query-invalid"
    members = ("field", "errors")

    def __init__(self, *, field: str, value: str, reason: str, hint: str) -> None:
        super().__init__(f"{field}: {reason} (got {value}); {hint}")
        self.field = field
        self.value = value
        self.reason = reason
        self.hint = hint

    @property
    def errors(self) -> list[dict[str, str]]:
        """Where: the query's parameter (`query.by`), as a request validation error says."""
        return [{"where": f"query.{self.field}", "problem": self.reason}]


class ReinstateRefused(JobRouterError):
    """`contracts reinstate` refused: `field` names what is wrong, `reason` what it needs."""

    status = 422
    slug = "reinstate-refused"

    def __init__(self, *, field: str, reason: str) -> None:
        super().__init__(f"reinstate: {field}: {reason}")
        self.field = field
        self.reason = reason


class LeaseLost(JobRouterError):
    """The leader's renewal found no lease of its own: another process took it (a later
    term) or it expired unrenewed. The leader steps down; nothing of it reaches a caller."""

    def __init__(self, worker_id: str, term: int | None) -> None:
        super().__init__(f"leader {worker_id} lost its lease (term {term})")
        self.worker_id = worker_id
        self.term = term
