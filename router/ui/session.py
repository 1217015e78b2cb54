"""The dashboard's sign-in: the same bearer tokens as the API, typed once into a form and kept
in a cookie (HttpOnly, SameSite=Strict, Secure behind https), so an owner sees only its own
jobs and only an operator acts on others', exactly as on `/v1`.

Every POST carries a CSRF token derived from the session token (`csrf_of`): a page of another
site can make the browser send the cookie, but it cannot read it, so it cannot produce the
field. The Origin header, when the browser sends one, must also be this server's.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Form, Request

from jobrouter.api import Router
from jobrouter.http.auth import Principal, get_router

COOKIE = "jobrouter_session"


class SignInRequired(Exception):
    """No valid session: the page answers with the sign-in form (see `jobrouter.ui.install`).
    `reason` is the token's status when it was presented (`revoked`, `expired`), else
    `signed-out`: a page refreshing itself says which, instead of swapping in a login form."""

    def __init__(self, reason: str = "signed-out") -> None:
        super().__init__(reason)
        self.reason = reason


class CsrfRefused(Exception):
    """A POST without this session's CSRF field, or from another origin: 403."""


def csrf_of(token: str) -> str:
    return hmac.new(token.encode(), b"jobrouter-ui-csrf", hashlib.sha256).hexdigest()


async def viewer(request: Request, router: Annotated[Router, Depends(get_router)]) -> Principal:
    token = request.cookies.get(COOKIE)
    record = await router.token(token) if token else None
    if record is None:
        raise SignInRequired()
    if (status := record.status()) != "live":
        raise SignInRequired(status)
    request.state.csrf = csrf_of(token or "")
    return Principal(owner=record.owner, operator=record.operator, token_id=record.id)


async def checked_post(
    request: Request,
    who: Annotated[Principal, Depends(viewer)],
    csrf: Annotated[str, Form()] = "",
) -> Principal:
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.url.netloc:
        raise CsrfRefused()
    if not hmac.compare_digest(csrf, str(request.state.csrf)):
        raise CsrfRefused()
    return who


def is_https(request: Request) -> bool:
    return request.url.scheme == "https"


Viewer = Annotated[Principal, Depends(viewer)]
Poster = Annotated[Principal, Depends(checked_post)]
