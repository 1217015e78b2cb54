"""schemathesis against the real server: every operation of the OpenAPI document, fuzzed from
its schemas, answers without a 5xx and as documented (status codes, content types, bodies).

The document is built in-process from the same configuration as the server's (so schemathesis
can collect the operations before the server runs) and checked equal to what the server
serves. Excluded checks:
- `positive_data_acceptance`: generated keys collide ("0" twice with another payload), and the
  same Idempotency-Key with another payload must be refused (422): that refusal of schema-valid
  data is the designed behaviour, not a fault.
- `negative_data_rejection`: a case made invalid by leaving out `Authorization` gets the token
  added back by this test, and unknown query parameters are ignored, as HTTP APIs do. Invalid
  bodies, headers and values are still sent, and must still answer a documented 4xx.
"""

from __future__ import annotations

import tomllib
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    negative_data_rejection,
    positive_data_acceptance,
)

from router.build import build_tasks
from router.config import RouterConfig
from router.http.app import create_app
from tests.acceptance.conftest import CONFIG, CONTRACT, Server

EXAMPLES = 30


def document() -> dict[str, Any]:
    text = CONFIG.format(db="unused.db", contract=CONTRACT, heartbeat=0.2)
    config = RouterConfig.model_validate(tomllib.loads(text))
    router: Any = SimpleNamespace(tasks=build_tasks(config), config=config)
    return create_app(router).openapi()


schema = schemathesis.openapi.from_dict(document())


@pytest.fixture(scope="module")
def operator_token(server: Server) -> str:
    return server.token("schemathesis", operator=True)


def test_the_server_serves_this_document(server: Server) -> None:
    assert httpx.get(f"{server.url}/openapi.json").json() == document()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # fmt: skip
def test_no_server_errors_and_answers_as_documented(
    case: Any, server: Server, operator_token: str
) -> None:
    case.call_and_validate(base_url=server.url,
                           headers={"Authorization": f"Bearer {operator_token}"},
                           excluded_checks=[positive_data_acceptance, negative_data_rejection],
                           timeout=10)
