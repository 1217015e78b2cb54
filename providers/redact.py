"""Secrets out of provider text: the one scrubber every stored or shown provider text goes through.

A provider's answer may echo what it was sent: a 401 body quoting the `Authorization` header, a
proxy's error page repeating the URL with `?key=...`, an SDK message naming the key. Whatever
the router stores (attempt and job errors, events, outbox rows), sends (webhooks, SSE, HTTP
answers) or logs comes from a `ProviderError`, so `ProviderError.__init__` scrubs its message
here, once. Edges that hold other text a provider wrote (an unexpected exception, a traceback
in a log line) call `scrub` too.

Two nets, both needed:

- the configured key VALUES, registered by the provider that reads them from the environment
  (`register_secret`): catches a key of any shape, even one no pattern knows;
- token PATTERNS (`SECRET_PATTERNS`): catches credentials the router never held (a provider
  echoing someone else's token, a key of another provider in an upstream's message). The same
  patterns make `jobrouter cassettes check` fail on a recording.

A successful answer is different (`scrub_output`): its text is the product an owner asked for, so
only the first net applies. A configured key value is removed from every string of the output,
keys of objects included, always (the router held that key: it must never hand it to an owner).
A token SHAPE in an answer is left as the provider wrote it: the router never held it, and an
answer may legitimately hold one (a code sample with `Bearer <token>`, an example `sk-...` key);
rewriting it would change a valid answer into another one behind the owner's back.

No library does this for arbitrary text: `detect-secrets` scans files with entropy plugins and
reports line numbers, it does not rewrite a string in place; this module is small on purpose.
"""

from __future__ import annotations

import re
import threading
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter registered values would blank ordinary words ("no-key")

# (label, pattern). Where the pattern has a group named `secret`, only that part is replaced
# (the header or parameter name stays readable); otherwise the whole match is.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("OpenAI/Anthropic-style key", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("bearer token", re.compile(r"\bBearer\s+(?P<secret>[A-Za-z0-9._~+/\-]{12,}=*)", re.I)),
    ("basic credentials", re.compile(r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{8,}=*)", re.I)),
    ("Replicate token", re.compile(r"\br8_[A-Za-z0-9]{20,}")),
    ("token credentials", re.compile(r"\bToken\s+(?P<secret>[A-Za-z0-9._\-]{12,})")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}")),
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    (
        "URL credentials",
        re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s/:@]+:(?!\[redacted\])(?P<secret>[^\s/@]+)@", re.I),
    ),
    (
        "credential query parameter",
        re.compile(
            r"[?&;](?:key|api[_-]?key|access[_-]?token|token|sig|signature)="
            r"(?P<secret>(?!\[)[^&\s\"'#]{6,})",
            re.I,
        ),
    ),
    (
        "credential field",
        re.compile(
            r"""["']?\b(?:api[_-]?key|x-api-key|x-goog-api-key|api-key|ocp-apim-subscription-key|"""
            r"""access[_-]?token|refresh[_-]?token|client[_-]?secret|secret[_-]?key|"""
            r"""aws_secret_access_key|password|sslpassword|authorization)["']?\s*[:=]\s*"""
            r"""(?:\n\s*-\s*)?["']?(?!\[scrubbed\]|\[redacted\]|Bearer\s|Basic\s|Token\s)"""
            r"""(?P<secret>[^\s"',}\]]{8,})""",
            re.I,
        ),
    ),
)

_lock = threading.Lock()
_values: frozenset[str] = frozenset()


def register_secret(value: str | None) -> None:
    """Remember a credential this process uses, so `scrub` removes it from any text."""
    global _values
    if value is None or len(value) < MIN_SECRET_LENGTH or value in _values:
        return
    with _lock:
        _values = _values | {value}


def _without_values(text: str) -> str:
    # longest first: a key that contains another registered key is removed whole
    for value in sorted(_values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_output(value: Any) -> Any:
    """A provider's answer (decoded JSON) with every registered secret value replaced in each
    string, object keys included; numbers, booleans and null unchanged. Token shapes stay (see
    the module docstring). A new value: the answer given is not changed."""
    if isinstance(value, str):
        return _without_values(value)
    if isinstance(value, dict):
        return {
            _without_values(k) if isinstance(k, str) else k: scrub_output(item)
            for k, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub_output(item) for item in value]
    return value


def scrub(text: str) -> str:
    """`text` with every registered secret and every token-shaped credential replaced, and
    any NUL character written as `\\x00` (no database column holds one: the router refuses
    such text, and a provider's error must still be recorded)."""
    text = _without_values(text.replace("\x00", "\\x00"))
    for _, pattern in SECRET_PATTERNS:
        text = pattern.sub(_replace, text)
    return text


def _replace(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex or match.group("secret") is None:
        return REDACTED
    start, end = match.span("secret")
    base = match.start()
    whole = match.group(0)
    return whole[: start - base] + REDACTED + whole[end - base :]


def find_secrets(text: str) -> list[str]:
    """Descriptions (kind + a redacted hint) of secret-looking values in `text`."""
    found = []
    for label, pattern in SECRET_PATTERNS:
        for match in pattern.finditer(text):
            value = match.group("secret") if "secret" in pattern.groupindex else match.group(0)
            if value is None or value.startswith(("[scrubbed]", REDACTED)):
                continue
            found.append(f"{label} ({value[:4]}... {len(value)} chars)")
    return found
