"""`jobrouter serve` and `jobrouter token create | list | revoke`: the HTTP API's commands.
FastAPI and uvicorn are imported by `serve` alone, never when the CLI starts; the token commands
read and write the store's tokens and nothing else (no router, no web framework)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from jobrouter.cli.common import ConfigOpt, DatabaseOpt, reading, run, settings

if TYPE_CHECKING:
    from jobrouter.store.tokens import ApiToken

token_app = typer.Typer(help="API tokens for `jobrouter serve`.", no_args_is_help=True)


def serve(
    config: ConfigOpt = None,
    host: Annotated[
        str | None,
        typer.Option(help="address to listen on; default: \\[http] host, else 127.0.0.1"),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="port; default: \\[http] port, else 8000")
    ] = None,
    database: DatabaseOpt = None,
) -> None:
    """Serve the HTTP API (and run jobs) until Ctrl-C."""
    from jobrouter.http.server import serve_config  # FastAPI and uvicorn: only for this command
    from jobrouter.logs import setup_logging

    setup_logging()
    run(lambda: serve_config(settings(config), host=host, port=port, database_url=database))


@token_app.command("create")
def token_create(
    owner: Annotated[str, typer.Argument(help="the owner the token acts for")],
    operator: Annotated[
        bool,
        typer.Option(
            "--operator", help="may also read, cancel and resolve the jobs of every owner"
        ),
    ] = False,
    expires: Annotated[
        str | None,
        typer.Option(
            help="stop working after this long: 90m, 12h, 30d, or seconds; default: never "
            "(until `jobrouter token revoke`)"
        ),
    ] = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Create a token and print it once: only its hash is stored, it cannot be shown again."""
    expires_in = _duration(expires) if expires is not None else None
    cfg = settings(config)

    async def step() -> str:
        async with reading(cfg, database) as store:
            made, _ = await store.tokens.create_token(
                owner, operator=operator, expires_in=expires_in
            )
            return made

    token = run(step)
    typer.echo(token)
    until = "" if expires_in is None else f", expires {_when(time.time() + expires_in)}"
    typer.echo(
        f"token for owner {owner!r}{' (operator)' if operator else ''}{until}: store it "
        "now, it is not shown again",
        err=True,
    )


@token_app.command("list")
def token_list(config: ConfigOpt = None, database: DatabaseOpt = None) -> None:
    """Every token: id, owner, operator or not, created, status (live, revoked, expired).
    Tokens themselves are never stored, so never shown."""
    cfg = settings(config)

    async def step() -> list[ApiToken]:
        async with reading(cfg, database) as store:
            return await store.tokens.list_tokens()

    records = run(step)
    typer.echo(
        "ID                                OWNER                 OPERATOR  CREATED"
        "               STATUS"
    )
    for record in records:
        status = record.status()
        if status == "live" and record.expires_at is not None:
            status = f"live until {_when(record.expires_at)}"
        elif status != "live":
            at = record.revoked_at if status == "revoked" else record.expires_at
            status = f"{status} {_when(at or 0)}"
        typer.echo(
            f"{record.id:<33} {record.owner:<21} {'yes' if record.operator else 'no':<9} "
            f"{_when(record.created_at)}  {status}"
        )


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="the token's ID, from `jobrouter token list`")],
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Revoke a token: its next request is refused (401 "revoked")."""
    cfg = settings(config)

    async def step() -> bool:
        async with reading(cfg, database) as store:
            return await store.tokens.revoke_token(token_id)

    if not run(step):
        typer.echo(f"no unrevoked token {token_id}; see `jobrouter token list`", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked token {token_id}")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(text: str) -> float:
    """`90m`, `12h`, `30d`, `2w` or plain seconds. Four units need no library (pytimeparse
    and friends parse far more than a flag should accept)."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:], 0)
    number = value[:-1] if unit else value
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise typer.BadParameter(
            f"{text!r}: give a positive duration such as 90m, 12h, 30d, or seconds",
            param_hint="--expires",
        )
    return seconds


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
