"""Log setup of the `jobrouter serve` and `jobrouter worker` processes.

Every line goes through `jobrouter.providers.redact.scrub` when it is formatted, traceback included:
a provider's exception text (chained under a `ProviderError`, or an unexpected one) may carry the
key it was sent, and the formatter is the one place every log line passes, ours, uvicorn's and
litellm's alike. A library user who configures logging can install `ScrubbingFormatter` too.
"""

from __future__ import annotations

import logging

from jobrouter.providers.redact import scrub

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class ScrubbingFormatter(logging.Formatter):
    """A `logging.Formatter` whose output holds no registered key and no token-shaped value.
    `inner`: the formatter whose layout to keep (e.g. the one `--log-level` installed)."""

    def __init__(self, fmt: str | None = FORMAT, inner: logging.Formatter | None = None) -> None:
        super().__init__(fmt)
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        text = self._inner.format(record) if self._inner is not None else super().format(record)
        return scrub(text)


def setup_logging(level: int = logging.INFO) -> None:
    """`logging.basicConfig` (a no-op when `--log-level` configured logging already), then
    every root handler formats through the scrubber, keeping its own layout."""
    logging.basicConfig(level=level, format=FORMAT)
    for handler in logging.getLogger().handlers:
        if not isinstance(handler.formatter, ScrubbingFormatter):
            handler.setFormatter(ScrubbingFormatter(inner=handler.formatter))
