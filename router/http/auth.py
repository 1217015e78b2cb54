"""Bearer tokens mapped to owners. An owner sees only its own jobs; an operator token (created
with `jobrouter token create OWNER --operator`) may also read, cancel and resolve any job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from jobrouter.api import Router
from jobrouter.http.problems import ProblemError

bearer = HTTPBearer(
    auto_error=False,
    bearerFormat="opaque",
    description="A token printed by `jobrouter token create OWNER`.",
)


@dataclass(frozen=True)
class Principal:
    owner: str
    operator: bool
    token_id: str = ""  # which token: open event streams are counted per token

    def may_see(self, owner: str) -> bool:
        return self.operator or owner == self.owner


def get_router(request: Request) -> Router:
    router: Router = request.app.state.router
    return router


async def authenticate(
    router: Annotated[Router, Depends(get_router)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    challenge = {"WWW-Authenticate": 'Bearer realm="jobrouter"'}
    if credentials is None:
        raise ProblemError(
            401,
            "token-missing",
            "send `Authorization: Bearer <token>`; create a "
            "token with `jobrouter token create OWNER`",
            headers=challenge,
        )
    record = await router.token(credentials.credentials)
    status = "unknown" if record is None else record.status()
    if record is None or status != "live":
        # The true reason: whoever presents a revoked or expired token once held it.
        raise ProblemError(
            401,
            f"token-{status}",
            f"the bearer token is {status}; ask for a new one (`jobrouter token create OWNER`)",
            headers=challenge,
        )
    return Principal(owner=record.owner, operator=record.operator, token_id=record.id)


async def require_operator(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.operator:
        raise ProblemError(
            403,
            "operator-only",
            "this needs an operator token; create one with "
            "`jobrouter token create OWNER --operator`",
        )
    return principal


Caller = Annotated[Principal, Depends(authenticate)]
Operator = Annotated[Principal, Depends(require_operator)]
RouterDep = Annotated[Router, Depends(get_router)]
