"""The test run is offline: a non-loopback connection or lookup fails, loopback works."""

from __future__ import annotations

import asyncio
import socket

import pytest


def test_a_public_address_is_unreachable() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="network unreachable"):
        sock.connect(("192.0.2.1", 443))  # TEST-NET-1: never routable anyway


def test_a_public_name_does_not_resolve() -> None:
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("api.openai.com", 443)


async def test_asyncio_connections_are_guarded_too() -> None:
    with pytest.raises(OSError):
        await asyncio.open_connection("192.0.2.1", 443)


def test_loopback_still_works() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())
            assert client.getpeername() == server.getsockname()
