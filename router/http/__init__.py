"""The HTTP service of jobrouter: `create_app(router)` and `serve(...)`."""

from router.http.app import create_app
from router.http.server import serve

__all__ = ["create_app", "serve"]
