"""An answer's body read within a cap, its compression undone within the same cap.

A provider chooses how many bytes it sends and how far they expand: a 1 MB gzip answer that
inflates to 1 GB, or a plain 2 GB body, held whole in memory took a worker past 2 GB of RSS and
blocked its event loop for over a second (issue 31). Both transports therefore read a body
through `Inflater`, never with a whole-body `read()`:

- the cap of a success answer is `answer_cap`: the provider's `max_answer_bytes` when set, else
  `DEFAULT_BASE` (256 KiB) plus `PER_TOKEN` (64) bytes for each token the request's `max_tokens`
  allows (a token is a few bytes of text; JSON escaping, the envelope and usage take the rest);
  over it the answer is `AnswerTooLarge` (rejected: the provider answered and may have acted);
- an error answer's body is cut at the caller's limit (the message is near the start);
- decompression (``gzip``, ``deflate``; the only codings we ask for) goes through
  `zlib.decompressobj` with `max_length`, so no single step produces more than what still fits:
  memory stays within the cap plus one network chunk, and each step is short (no loop stall);
- any other ``Content-Encoding`` (``br``, ``zstd``, stacked codings) is refused as unreadable,
  never passed on undecoded.

The reader stops at the cap: the rest of a huge body is never read (the caller drops the
connection), so a 2 GB answer costs what the cap costs.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable

from jobrouter.providers.errors import AnswerTooLarge, Rejected

DEFAULT_BASE = 256 * 1024
PER_TOKEN = 64
# What we ask for: the codings `Inflater` undoes within the cap.
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def answer_cap(max_answer_bytes: int | None, max_tokens: int | None) -> int:
    """Bytes a success answer may hold (decoded): the configured cap, else sized to max_tokens."""
    if max_answer_bytes is not None:
        return max_answer_bytes
    return DEFAULT_BASE + PER_TOKEN * (max_tokens or 0)


class UnreadableEncoding(Exception):
    """The body is in a coding we did not ask for and cannot undo within a cap, or is corrupt."""


class Inflater:
    """Decodes one body chunk by chunk, producing at most `limit` + 1 bytes in all: once
    `over` is True the body is longer than `limit` and nothing more is decoded."""

    def __init__(self, encoding: str, limit: int) -> None:
        coding = encoding.strip().lower()
        if coding in ("", "identity"):
            self._inflate: zlib._Decompress | None = None
        elif coding in _WBITS:
            self._inflate = zlib.decompressobj(_WBITS[coding])
        else:
            raise UnreadableEncoding(f"Content-Encoding {encoding!r} (asked for {ACCEPT_ENCODING})")
        self._raw_deflate = coding == "deflate"  # some servers send raw deflate: tried on error
        self._limit = limit
        self.size = 0

    @property
    def over(self) -> bool:
        return self.size > self._limit

    def feed(self, data: bytes) -> bytes:
        """The decoded bytes of `data` that fit (one past the limit, so `over` can tell)."""
        if self.over:
            return b""
        if self._inflate is None:
            out = data[: self._limit + 1 - self.size]
            self.size += len(out)
            return out
        parts: list[bytes] = []
        pending = data
        while pending and not self.over and not self._inflate.eof:
            out = self._step(pending)
            pending = self._inflate.unconsumed_tail
            self.size += len(out)
            parts.append(out)
        return b"".join(parts)

    def _step(self, data: bytes) -> bytes:
        assert self._inflate is not None
        room = self._limit + 1 - self.size
        try:
            return self._inflate.decompress(data, room)
        except zlib.error as exc:
            if self._raw_deflate and self.size == 0:
                self._raw_deflate = False
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                return self._step(data)
            raise UnreadableEncoding(f"the compressed body is corrupt ({exc})") from exc


async def read_capped(
    chunks: AsyncIterable[bytes], encoding: str, limit: int
) -> tuple[bytes, bool]:
    """(the decoded body's first `limit` bytes, whether it was longer); reading stops at once
    when it is. `UnreadableEncoding` for a coding we cannot undo or a corrupt stream."""
    inflater = Inflater(encoding, limit)
    parts: list[bytes] = []
    async for chunk in chunks:
        parts.append(inflater.feed(chunk))
        if inflater.over:
            break
    body = b"".join(parts)
    return body[:limit], inflater.over


def too_large(provider: str, limit: int, status: int) -> AnswerTooLarge:
    return AnswerTooLarge(
        f"HTTP {status} answer is larger than {limit} bytes (decoded); reading stopped there "
        "(providers.NAME.max_answer_bytes, default sized to max_tokens)",
        provider=provider,
        limit=limit,
    )


def unreadable(provider: str, status: int, exc: UnreadableEncoding) -> Rejected:
    return Rejected(
        f"HTTP {status} answer cannot be decoded: {exc}",
        provider=provider,
        counts_against_health=True,
    )
