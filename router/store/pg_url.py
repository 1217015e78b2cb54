"""A PostgreSQL URL as it may be shown: its password masked, wherever libpq accepts one."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMS = frozenset({"password", "sslpassword"})  # libpq keys whose values are secrets
_USERINFO_PASSWORD = re.compile(r"(://[^:/?#@]*):[^@/?#]*@")
_PARAM_PASSWORD = re.compile(r"(?i)\b(password|sslpassword)=[^&#\s]*")


def redact(url: str) -> str:
    """The URL with its password (in the authority, as `?password=` or `?sslpassword=`)
    masked. A URL too malformed to parse is masked by pattern instead: never an exception,
    since this runs while reporting another error."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a malformed port: the pattern path below then)
    except ValueError:
        masked = _USERINFO_PASSWORD.sub(r"\1:***@", url)
        return _PARAM_PASSWORD.sub(r"\1=***", masked)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    query = urlencode(
        [(k, "***" if k.lower() in SECRET_PARAMS else v) for k, v in parse_qsl(parts.query)],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
