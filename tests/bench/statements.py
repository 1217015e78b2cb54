"""Count what each benchmark process sends to PostgreSQL, by statement and by transaction.

The server's `pg_stat_database.xact_commit` says how many transactions committed, not which.
`pg_stat_statements` would say, but it needs `shared_preload_libraries` and a server restart,
which a shared server cannot take. So each process counts on the client side instead: asyncpg's
two entry points (`Connection.execute` without arguments, the simple-query path of BEGIN,
COMMIT and the pool's reset; `Connection.__execute`, every prepared statement) are wrapped, and
each statement is attributed to the transaction it ran in. A statement outside a transaction
block is a transaction of its own (an autocommit read is a commit too); statements between
BEGIN and COMMIT are one transaction, named by the named queries it ran. The sum over the
fleet is checked against the server's count in the benchmark output.

    JOBROUTER_BENCH_STATEMENTS=<dir> python -m tests.bench.statements worker --config ...

runs `jobrouter worker` counted, and writes `<dir>/worker-<pid>.json` at exit (with
JOBROUTER_BENCH_PROFILE=<path> it is profiled too; see profile_summary.py).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ENV = "JOBROUTER_BENCH_STATEMENTS"
PROFILE_ENV = "JOBROUTER_BENCH_PROFILE"  # profile the worker too: <path>-worker-<pid>.*


class Tally:
    def __init__(self) -> None:
        self.statements: Counter[str] = Counter()
        self.transactions: Counter[str] = Counter()
        self._open: dict[int, list[str]] = {}  # connection id -> statements since BEGIN
        self._names: dict[str, str] = {}

    def name(self, query: str) -> str:
        if not self._names:
            from jobrouter.store.connector import load_queries
            from jobrouter.store.postgres import translate

            for name, text in load_queries("postgres").items():
                self._names[translate(text)[0].strip()] = name
        text = query.strip().rstrip(";")
        named = self._names.get(text)
        if named is not None:
            return named
        if "pg_advisory_unlock_all" in text:
            return "(pool reset)"
        return " ".join(text.split())[:60]

    def seen(self, conn: Any, query: str) -> None:
        name = self.name(query)
        self.statements[name] += 1
        key = id(conn)
        if name.startswith("BEGIN"):  # asyncpg's Transaction.start
            self._open[key] = []
        elif name in ("COMMIT", "ROLLBACK"):
            ran = self._open.pop(key, [])
            label = "+".join(dict.fromkeys(ran)) or "(empty)"
            self.transactions[f"{name.lower()}: {label}"] += 1
        elif key in self._open:
            self._open[key].append(name)
        else:
            self.transactions[f"autocommit: {name}"] += 1

    def dump(self) -> dict[str, Any]:
        return {"statements": dict(self.statements), "transactions": dict(self.transactions)}


TALLY = Tally()


def install() -> None:
    """Wrap asyncpg's two statement paths in this process (once)."""
    from asyncpg import connection

    cls: Any = connection.Connection
    if getattr(cls, "_bench_counted", False):
        return
    plain, prepared = cls.execute, cls._Connection__execute

    async def execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if not args:  # with args it goes through __execute, counted there
            TALLY.seen(self, query)
        return await plain(self, query, *args, **kwargs)

    async def _execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        TALLY.seen(self, query)
        return await prepared(self, query, *args, **kwargs)

    notified = cls._process_notification

    def _process_notification(self: Any, pid: int, channel: str, payload: Any) -> None:
        # Each delivery to a listening backend is a transaction on the server (it reads the
        # notification queue in one); deliveries that arrive together share it, so this count
        # is an upper bound on those commits.
        TALLY.transactions[f"notification received: {channel}"] += 1
        notified(self, pid, channel, payload)

    cls.execute, cls._Connection__execute, cls._bench_counted = execute, _execute, True
    cls._process_notification = _process_notification


def write_now(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(TALLY.dump(), indent=1))


def write_at_exit(folder: Path) -> None:
    atexit.register(write_now, folder, f"worker-{os.getpid()}")


def merged(folder: Path) -> dict[str, Counter[str]]:
    """Every process's counts in `folder`, added up."""
    total: dict[str, Counter[str]] = {"statements": Counter(), "transactions": Counter()}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        for kind in total:
            total[kind].update(data[kind])
    return total


def profile_until_exit(out: Path) -> None:
    from pyinstrument import Profiler

    from tests.bench import profile_summary

    profiler = Profiler(interval=0.0005)
    # Started by SIGUSR1 when the benchmark's clock starts: start-up (litellm's import, the
    # warm-up) stays out of the profile; stopped at exit (shutdown is short).
    signal.signal(signal.SIGUSR1, lambda *_: profiler.start())

    def stop() -> None:
        if profiler.is_running:
            profiler.stop()
            profile_summary.write(profiler, out.with_name(f"{out.name}-worker-{os.getpid()}"))

    atexit.register(stop)


def main() -> None:
    folder = os.environ.get(ENV)
    if folder:
        install()
        write_at_exit(Path(folder))
    profile = os.environ.get(PROFILE_ENV)
    if profile:
        profile_until_exit(Path(profile))
    from jobrouter.cli import main as cli

    sys.argv[0] = "jobrouter"
    cli()


if __name__ == "__main__":
    main()
