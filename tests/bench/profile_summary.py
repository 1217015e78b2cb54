"""A profile in one line per library: where a process's CPU went (pyinstrument's self time of
every frame, added up by the package its file belongs to). `python -m tests.bench --profile`
prints it for the submitting process and for each `jobrouter worker`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

OURS = ("router", "providers", "contracts", "tests")


def package_of(path: str | None) -> str:
    if not path:
        return "(other)"
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    parts = Path(path).parts
    for name in OURS:
        if name in parts:
            return f"jobrouter:{name}" if name != "tests" else "bench"
    if "python3" in path:
        for part in reversed(parts[:-1]):
            if part.startswith("python3"):
                break
            if part in ("asyncio", "json", "concurrent", "logging", "email", "http"):
                return f"stdlib:{part}"
        return "stdlib"
    return "(other)"


def summarize(root: Any) -> dict[str, float]:
    """Share of the sampled time per package (percent, largest first) of a pyinstrument frame
    tree; idle time (the event loop waiting) is left out."""
    totals: Counter[str] = Counter()
    stack = [root] if root is not None else []
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        own = frame.total_self_time
        # Waiting (awaits, the loop's select) and frames without a file are not CPU spent by
        # any library: left out, so the shares are of the work done.
        if (
            own <= 0
            or frame.is_synthetic
            or not frame.file_path
            or frame.function in ("select", "poll", "epoll", "[await]", "[idle]")
        ):
            continue
        totals[package_of(frame.file_path)] += own
    whole = sum(totals.values()) or 1.0
    return {name: round(100 * t / whole, 1) for name, t in totals.most_common(12)}


def write(profiler: Any, out: Path) -> dict[str, float]:
    """The profile as text and HTML, and its summary as JSON, next to `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text(profiler.output_text(unicode=True, color=False))
    out.with_suffix(".html").write_text(profiler.output_html())
    session = profiler.last_session
    summary = summarize(session.root_frame() if session is not None else None)
    out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=1))
    return summary
