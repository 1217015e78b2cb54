"""The docs name no folder of one machine (issue 32 item 5): docs/local-provider.md once told
readers to install `/work/wheels/portable/...`, a folder that existed on one development
machine only. Paths in the docs are relative to the repository, `~`, or the reader's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "tools").glob("*")])
# An absolute path under a home or workspace folder; `router/worker.py` is not one (the slash
# follows a name), nor is `~/.cache` (a reader's own home).
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|Users)/[\w.-]*")


def test_the_pattern_tells_machine_paths_from_repository_ones() -> None:
    found = MACHINE_PATH.findall(
        "pip install /work/wheels/x.whl; see router/worker.py; ~/.cache/g; /home/dev/src; "
        "cd /root/repo"
    )
    assert found == ["/work/wheels", "/home/dev", "/root/repo"]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_machine_path_in_the_docs(path: Path) -> None:
    """mutant: the old `/work/wheels/portable/...` install line put back into
    docs/local-provider.md, seen failing."""
    lines = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if MACHINE_PATH.search(line)
    ]
    assert lines == []
