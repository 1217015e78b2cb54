"""A console page that refreshes itself (htmx polls `/ui/jobs/{id}/live` and `/ui/jobs/rows`)
after its session's token was revoked or expired: the poll gets a last fragment saying why, with
no `hx-trigger` (so the polling stops), never the login page swapped into the part (issue 31
item 4, the console's half). The app in the test's event loop over ASGI, a real store."""

from __future__ import annotations

import httpx

from jobrouter.config import HttpConfig
from jobrouter.http.app import create_app
from jobrouter.ui.session import COOKIE
from tests.support.backends import db_url as db_url  # a fixture, used by name
from tests.support.echo_router import echo_router
from tests.support.store_jobs import create_job

HX = {"HX-Request": "true"}
ENDED = {"revoked": "was revoked", "expired": "expired"}


def session(token: str) -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={token}"}


async def test_a_revoked_or_expired_session_ends_live_updates_saying_why(db_url: str) -> None:
    """Two sessions follow one queued job: the first token is revoked, the second expires. Each
    poll then answers the final fragment naming the reason; a plain GET still goes to the login
    form. (mutants: the HX-Request branch of `_sign_in` removed — the poll gets a 303 to the
    login page; `viewer` raising SignInRequired() without the token's status — the reason reads
    signed-out; each seen failing.)"""
    async with echo_router(db_url) as router:
        job = await create_job(
            router.store,
            owner="shop-1",
            idempotency_key="live-ended",
            task="echo",
            input={"text": "hi"},
            params={},
            deadline_s=None,
            claimed_by=None,
            claim_s=0.0,
        )
        (revoked, record), (expired, later) = [
            await router.store.tokens.create_token("shop-1") for _ in range(2)
        ]
        app = create_app(router, HttpConfig())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
            for token in (revoked, expired):
                live = await http.get(f"/ui/jobs/{job.id}/live", headers=session(token))
                assert live.status_code == 200 and "hx-trigger" in live.text  # polling, signed in
            assert await router.store.tokens.revoke_token(record.id)
            async with router.store.connector.write() as tx:
                await tx.execute(
                    "UPDATE api_tokens SET expires_at = 1 WHERE id = :id", {"id": later.id}
                )
            for token, reason in ((revoked, "revoked"), (expired, "expired")):
                for path in (f"/ui/jobs/{job.id}/live", "/ui/jobs/rows"):
                    ended = await http.get(path, headers={**HX, **session(token)})
                    assert ended.status_code == 200, (path, ended.status_code)
                    assert f'data-reason="{reason}"' in ended.text
                    assert f"its token {ENDED[reason]}" in ended.text
                    assert "hx-trigger" not in ended.text
                page = await http.get(f"/ui/jobs/{job.id}", headers=session(token))
                assert page.status_code == 303
                assert page.headers["location"].startswith("/ui/login")
