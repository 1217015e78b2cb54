"""The HTTP service of jobrouter: `create_app(router)` and `serve(...)`.

Both are imported on first use (PEP 562): `jobrouter serve` lives in `jobrouter.cli.http`, which
every CLI command loads, and the other commands must not pay for FastAPI and uvicorn.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from jobrouter.http.app import create_app

        return create_app
    if name == "serve":
        from jobrouter.http.server import serve

        return serve
    raise AttributeError(f"module 'jobrouter.http' has no attribute {name!r}")
