"""The contract fingerprint: sha256 of the canonical JSON of everything that affects behaviour.

Included: name, version, side_effects, prompt (system, user, examples), input_schema,
output_schema, sampling, checks and cases (inputs and expectations). Excluded, because they are
cosmetic: `description` and every `note`. Canonical JSON means sorted keys, no whitespace, UTF-8,
no NaN; pydantic has already normalised types (``temperature: 0`` and ``0.0`` are the same float),
so the same contract gives the same fingerprint in every process, on every machine.

A certification records this fingerprint; when the contract changes, the fingerprint changes and
the certification is stale.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from jobrouter.contracts.memo import derived
from jobrouter.contracts.model import Contract

# Bump when the payload's shape changes, so old certifications become stale rather than wrong.
FINGERPRINT_SCHEME = 1

_COSMETIC: dict[str, Any] = {
    "description": True,
    "checks": {"__all__": {"note"}},
    "cases": {"__all__": {"note": True, "expect": {"__all__": {"note"}}}},
}


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept, NaN refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def contract_fingerprint(contract: Contract) -> str:
    """``sha256:<hex>`` of the behaviour-relevant content of `contract` (memoised per instance)."""
    return derived(contract, "fingerprint", lambda: _compute(contract))


def _compute(contract: Contract) -> str:
    payload = {
        "scheme": FINGERPRINT_SCHEME,
        "contract": contract.model_dump(mode="json", exclude=_COSMETIC),
    }
    digest = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
