"""vcrpy cassettes of real provider calls: record (scrubbed), replay strictly, check for staleness.

Layout::

    cassettes/<provider>/<group>/<name>.yaml    group: a contract name, or a test's name
    cassettes/<provider>/<group>/meta.json      fingerprints the group was recorded under

Replay (`record=False`) uses ``record_mode="none"``: a request the cassette lacks raises vcrpy's
``CannotOverwriteExistingCassetteException`` (the litellm adapter turns it into `CassetteMiss`).
Recording (`record=True`) uses ``"all"``: every request goes out and its answer is written.

Requests match on method, scheme, host, port, path, query AND body. The host and port are not
normalised: a cassette recorded against ``127.0.0.1:8081`` replays only for a provider whose
``api_base`` says 8081. That is consistent with staleness: the ``api_base`` is part of the
provider fingerprint, so moving a server to another port makes its cassettes stale (re-record)
rather than silently reusing answers from a different endpoint.

Scrubbing happens before anything is written (`before_record_request` /
`before_record_response`): credential headers, credential query parameters, and credential keys
anywhere inside JSON request bodies. `check_cassettes` then scans every file for anything that
still looks like a secret, and compares each group's meta.json with the current fingerprints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml

from jobrouter.providers.redact import find_secrets

SCRUBBED = "[scrubbed]"
MATCH_ON = ("method", "scheme", "host", "port", "path", "query", "body")
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "anthropic-api-key",
        "openai-organization",
        "openai-project",
        "cookie",
        "set-cookie",
        "ocp-apim-subscription-key",
    }
)
SECRET_QUERY = ("key", "api_key", "api-key", "access_token", "token", "sig", "signature")
# JSON keys (compared case-insensitively, "-" as "_") whose values are credentials.
SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "access_token",
        "refresh_token",
        "client_secret",
        "secret",
        "password",
        "authorization",
        "aws_secret_access_key",
        "aws_session_token",
    }
)
META_FILE = "meta.json"
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


# --- recording and replay ----------------------------------------------------------------------


def cassette_path(root: Path, provider: str, group: str, name: str) -> Path:
    """``root/<provider>/<group>/<name>.yaml``; each part must be a plain file-name segment."""
    for part in (provider, group, name):
        if not _SEGMENT.match(part) or ".." in part:
            raise ValueError(f"cassette path part {part!r} must match {_SEGMENT.pattern}")
    return root / provider / group / f"{name}.yaml"


def cassette(path: Path, *, record: bool) -> AbstractContextManager[Any]:
    """A vcrpy cassette at `path`: strict replay, or (record=True) record everything, scrubbed."""
    try:
        import vcr  # the [dev]/test dependency is imported only when a cassette is used
    except ImportError as exc:
        raise RuntimeError("cassettes need vcrpy: pip install vcrpy") from exc
    recorder = vcr.VCR(
        record_mode="all" if record else "none",
        match_on=MATCH_ON,
        decode_compressed_response=True,
        filter_headers=sorted(SECRET_HEADERS),
        filter_query_parameters=SECRET_QUERY,
        before_record_request=scrub_request,
        before_record_response=scrub_response,
    )
    return recorder.use_cassette(str(path))  # type: ignore[no-any-return]


def scrub_request(request: Any) -> Any:
    """vcrpy hook: drop credential headers; blank credential keys in a JSON body (any depth).

    vcrpy runs it on a copy, both before writing and before matching a live request in replay,
    so recorded and live bodies compare equal after scrubbing.
    """
    for header in list(request.headers):
        if header.lower() in SECRET_HEADERS:
            del request.headers[header]
    body = request.body
    if not body:
        return request
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return request  # not JSON (form or binary): the header and query filters still apply
    cleaned, changed = _scrub_json(data)
    if changed:
        request.body = json.dumps(cleaned).encode("utf-8")
    return request


def scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    """vcrpy hook: drop credential and cookie headers from a recorded response."""
    headers = response.get("headers") or {}
    response["headers"] = {k: v for k, v in headers.items() if k.lower() not in SECRET_HEADERS}
    return response


def _scrub_json(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            if _is_secret_key(key) and item not in (None, "", SCRUBBED):
                out[key], changed = SCRUBBED, True
            else:
                out[key], sub = _scrub_json(item)
                changed = changed or sub
        return out, changed
    if isinstance(value, list):
        pairs = [_scrub_json(item) for item in value]
        return [item for item, _ in pairs], any(sub for _, sub in pairs)
    return value, False


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS


# --- meta.json: what a group was recorded under --------------------------------------------------


@dataclass(frozen=True)
class Meta:
    provider: str
    provider_fingerprint: str
    group: str
    contract_fingerprint: str | None  # None for a test group that certifies no contract
    recorded_at: str
    notes: str = ""


def write_meta(
    folder: Path,
    *,
    provider: str,
    provider_fingerprint: str,
    contract_fingerprint: str | None,
    notes: str = "",
) -> Meta:
    """Write ``folder/meta.json`` (call it when a recording of the folder completes)."""
    meta = Meta(
        provider=provider,
        provider_fingerprint=provider_fingerprint,
        group=folder.name,
        contract_fingerprint=contract_fingerprint,
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        notes=notes,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).write_text(json.dumps(meta.__dict__, indent=2, sort_keys=True) + "\n")
    return meta


def read_meta(folder: Path) -> Meta:
    data = json.loads((folder / META_FILE).read_text())
    return Meta(**data)


# --- checking -------------------------------------------------------------------------------------

ProblemKind = Literal["secret", "stale", "missing_meta", "bad_meta", "unexpected"]


@dataclass(frozen=True)
class Problem:
    path: Path
    kind: ProblemKind
    detail: str  # never contains the secret itself


@dataclass(frozen=True)
class Expected:
    """Current fingerprints: provider name -> provider fingerprint, group -> contract fingerprint.

    A group missing from `contracts` is only checked for its provider fingerprint (a test group).
    """

    providers: Mapping[str, str]
    contracts: Mapping[str, str]


def check_cassettes(root: Path, expected: Expected | None = None) -> list[Problem]:
    """Every problem under `root`: secrets in any file; missing, unreadable or stale meta.json.

    Without `expected` only secrets and meta presence are checked. With it, a group is stale
    when its provider or contract fingerprint differs from the current one, and a provider
    folder that is not configured any more is reported as unexpected.
    """
    problems: list[Problem] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        problems.extend(_secret_problems(path))
    for folder in _group_folders(root):
        problems.extend(_meta_problems(root, folder, expected))
    return problems


def _group_folders(root: Path) -> Iterator[Path]:
    """Folders that hold cassettes (``<provider>/<group>`` with at least one .yaml)."""
    yield from sorted({p.parent for p in root.rglob("*") if p.suffix in (".yaml", ".yml")})


def _secret_problems(path: Path) -> list[Problem]:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return [Problem(path, "secret", f"unreadable, cannot be checked: {exc}")]
    texts = [text, *_yaml_strings(text)] if path.suffix in (".yaml", ".yml") else [text]
    hits = sorted({hit for chunk in texts for hit in find_secrets(chunk)})
    return [Problem(path, "secret", f"looks like a secret: {hit}") for hit in hits]


def _yaml_strings(text: str) -> list[str]:
    """Every string inside a YAML document (bodies are JSON inside YAML scalars)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    out: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, bytes):
            out.append(item.decode("utf-8", errors="replace"))
        elif isinstance(item, str):
            out.append(item)
    return out


def _meta_problems(root: Path, folder: Path, expected: Expected | None) -> list[Problem]:
    rel = folder.relative_to(root)
    if len(rel.parts) != 2:
        return [Problem(folder, "unexpected", f"{rel}: cassettes belong in <provider>/<group>/")]
    provider, group = rel.parts
    if not (folder / META_FILE).exists():
        return [Problem(folder, "missing_meta", f"{rel} has no {META_FILE}: re-record it")]
    try:
        meta = read_meta(folder)
    except (ValueError, TypeError) as exc:
        return [Problem(folder / META_FILE, "bad_meta", f"{rel}/{META_FILE} unreadable: {exc}")]
    if expected is None:
        return []
    if provider not in expected.providers:
        return [Problem(folder, "unexpected", f"{rel}: provider {provider!r} is not configured")]
    return _stale(folder, rel, meta, expected.providers[provider], expected.contracts.get(group))


def _stale(
    folder: Path, rel: Path, meta: Meta, provider_fp: str, contract_fp: str | None
) -> list[Problem]:
    reasons = []
    if meta.provider_fingerprint != provider_fp:
        recorded = meta.provider_fingerprint[:12]
        reasons.append(f"provider fingerprint {recorded} -> {provider_fp[:12]}")
    if contract_fp is not None and meta.contract_fingerprint != contract_fp:
        was = (meta.contract_fingerprint or "none")[:12]
        reasons.append(f"contract fingerprint {was} -> {contract_fp[:12]}")
    if not reasons:
        return []
    return [Problem(folder, "stale", f"{rel} is stale ({'; '.join(reasons)}): re-record it")]
