"""Who a job is for and under which key: the one place these are checked (`Router.submit`,
and the HTTP API before it reads the body further, call `check_identity`)."""

from __future__ import annotations

from jobrouter.errors import InvalidIdempotencyKey, InvalidIdentity

MAX_KEY_LENGTH = 255
NUL_REASON = "contains a NUL character (\\x00), which no key or owner may hold"


def check_identity(owner: str, idempotency_key: str) -> None:
    """Refuse an owner or key no job can have, before anything else about the job is read.
    A NUL is refused here too (the store would refuse it later, after the door), so that a
    bad key is always the key's error, whatever else is wrong with the submit."""
    if not owner or not owner.strip():
        raise InvalidIdentity("owner", "must be a non-empty string")
    if "\x00" in owner:
        raise InvalidIdentity("owner", NUL_REASON)
    if not idempotency_key or len(idempotency_key) > MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(
            f"must be 1 to {MAX_KEY_LENGTH} characters, got {len(idempotency_key)}"
        )
    if "\x00" in idempotency_key:
        raise InvalidIdempotencyKey(NUL_REASON)
