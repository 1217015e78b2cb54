"""`jobrouter serve` and `jobrouter token create`: registered on the CLI by `router.cli.main`."""

from __future__ import annotations

from typing import Annotated

import typer

from router.cli import ConfigOpt, DatabaseOpt, app, err, run, settings

token_app = typer.Typer(help="API tokens for `jobrouter serve`.", no_args_is_help=True)
app.add_typer(token_app, name="token")


@app.command()
def serve(
    config: ConfigOpt = None,
    host: Annotated[str | None, typer.Option(help="address to listen on; default: "
                                             "\\[http] host, else 127.0.0.1")] = None,
    port: Annotated[int | None, typer.Option(help="port; default: \\[http] port, "
                                             "else 8000")] = None,
    database: DatabaseOpt = None,
) -> None:
    """Serve the HTTP API (and run jobs) until Ctrl-C."""
    from router.http.server import serve_config  # FastAPI and uvicorn: only for this command
    from router.logs import setup_logging

    setup_logging()

    run(lambda: serve_config(settings(config), host=host, port=port, database_url=database))


@token_app.command("create")
def token_create(
    owner: Annotated[str, typer.Argument(help="the owner the token acts for")],
    operator: Annotated[bool, typer.Option("--operator", help="may also read, cancel and "
                                           "resolve the jobs of every owner")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Create a token and print it once: only its hash is stored, it cannot be shown again."""
    from router.http.server import create_token

    token = run(lambda: create_token(settings(config), owner, operator=operator,
                                     database_url=database))
    typer.echo(token)
    err.print(f"token for owner {owner!r}{' (operator)' if operator else ''}: store it now, "
              "it is not shown again")
