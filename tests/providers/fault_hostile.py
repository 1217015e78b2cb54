"""The fault server's hostile answers: bodies built to take a client's memory (issue 31).

Each is generated lazily, a block at a time, and stops as soon as the client goes away: a client
that stops at its cap costs the server (and the machine) what it read, not gigabytes.

    bomb    `status` (default 200) with a body compressed as `encoding` (``gzip`` or ``deflate``)
            that expands to `expands_to` bytes (default 1 GiB) of spaces; sent chunked
    huge    200 with ``Content-Length: bytes`` (default 2 GiB), written in blocks of `block`
            bytes (default 64 KiB), `pause` seconds apart (default 0: as fast as it drains;
            a pause makes it a trickled body that no inactivity timeout ever ends)
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Iterator
from typing import Any

HOSTILE_KINDS = frozenset({"bomb", "huge"})
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
_PLAIN_BLOCK = b" " * (1 << 20)


async def serve_hostile(writer: asyncio.StreamWriter, spec: dict[str, Any]) -> bool:
    """Serve a hostile scenario; False: the connection must close (the body is not framed to
    be followed by another answer, or the client left)."""
    if spec["kind"] == "bomb":
        await _bomb(writer, spec)
    else:
        await _huge(writer, spec)
    return False


async def _bomb(writer: asyncio.StreamWriter, spec: dict[str, Any]) -> None:
    status = int(spec.get("status", 200))
    encoding = str(spec.get("encoding", "gzip"))
    blocks = max(2, int(spec.get("expands_to", 1 << 30)) // len(_PLAIN_BLOCK))
    head = [
        f"HTTP/1.1 {status} Bomb",
        "Content-Type: application/json",
        f"Content-Encoding: {encoding}",
        "Transfer-Encoding: chunked",
        "Connection: close",
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    for segment in _bomb_segments(encoding, blocks):
        await _chunk(writer, segment)
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def _bomb_segments(encoding: str, blocks: int) -> Iterator[bytes]:
    """The compressed stream of `blocks` plain blocks, compressed twice only: after a full
    flush the compressor starts afresh, so one block's segment repeats byte for byte (compressing
    a whole GiB would cost seconds of CPU beside the client under test). The trailer's checksum
    is computed at the end, if a client reads that far."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, _WBITS[encoding])
    yield squeeze.compress(_PLAIN_BLOCK) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(_PLAIN_BLOCK) + squeeze.flush(zlib.Z_FULL_FLUSH)
    for _ in range(blocks - 1):
        yield again
    finish = squeeze.flush(zlib.Z_FINISH)
    if encoding == "gzip":
        crc = 0
        for _ in range(blocks):
            crc = zlib.crc32(_PLAIN_BLOCK, crc)
        size = blocks * len(_PLAIN_BLOCK)
        yield finish[:-8] + struct.pack("<II", crc, size & 0xFFFFFFFF)
    else:
        adler = 1
        for _ in range(blocks):
            adler = zlib.adler32(_PLAIN_BLOCK, adler)
        yield finish[:-4] + struct.pack(">I", adler)


async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    if data:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()


async def _huge(writer: asyncio.StreamWriter, spec: dict[str, Any]) -> None:
    size = int(spec.get("bytes", 1 << 31))
    block = _PLAIN_BLOCK[: int(spec.get("block", 1 << 16))]
    pause = float(spec.get("pause", 0.0))
    head = [
        "HTTP/1.1 200 OK",
        "Content-Type: application/json",
        f"Content-Length: {size}",
        "Connection: close",
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    sent = 0
    while sent < size:
        piece = block[: size - sent]
        writer.write(piece)
        await writer.drain()
        sent += len(piece)
        if pause:
            await asyncio.sleep(pause)
