"""Recorded cassettes: the ones jobrouter ships (the top-level cassettes/ folder, in the wheel as
the package `jobrouter.cassettes`, recorded from real local llama.cpp servers with
cassettes/jobrouter.toml), and certification through
cassettes: replay (or record) one (provider, contract) pair's calls, and keep the live
certification beside its cassette. Used by `jobrouter contracts run --cassettes` and the demo."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from jobrouter.certifier import Pair
from jobrouter.providers import Provider

# The certification computed live while recording, kept beside the cassette: replaying the
# cassette must give the same record (tests/contracts/test_replay_equals_live.py).
LIVE_RECORD = "certification.json"


def shipped_cassettes() -> Path:
    """The folder of the cassettes jobrouter ships, found through importlib.resources: the same
    from a source checkout and from an installed wheel."""
    folder = resources.files("jobrouter.cassettes")
    if not isinstance(folder, Path):  # vcrpy reads (and, recording, writes) real files
        raise RuntimeError(
            f"jobrouter.cassettes is not a folder on disk ({folder!r}): install "
            "jobrouter as files, not as a zip"
        )
    return folder


@contextmanager
def recording(root: Path | None, record: bool, provider: Provider, pair: Pair) -> Iterator[None]:
    """Replay (or record) one pair's calls from <root>/<provider>/<contract>/certify.yaml."""
    if root is None:
        yield
        return
    from jobrouter.providers.cassettes import cassette, cassette_path, write_meta

    path = cassette_path(root, pair.provider, pair.contract.name, "certify")
    if record and path.exists():
        path.unlink()  # vcrpy's "all" mode would keep answers no new request matches
    with cassette(path, record=record):
        yield
    if record:
        write_meta(
            path.parent,
            provider=pair.provider,
            provider_fingerprint=provider.fingerprint,
            contract_fingerprint=pair.contract_fingerprint,
        )
