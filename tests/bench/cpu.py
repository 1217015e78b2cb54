"""CPU time read from Linux's /proc: the whole machine's, one process's, PostgreSQL's.

Every figure is in seconds, read in clock ticks (SC_CLK_TCK, 100 a second here): each reading
of each process is truncated to a tick, so a difference is exact to about 10 ms per process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")

# A process is known by its pid and its start time (ticks after boot): a pid reused by a
# process started later is another process.
Identity = tuple[int, int]


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine (every core) since boot."""
    return busy_ticks((PROC / "stat").read_text()) * TICK_S


def busy_ticks(proc_stat: str) -> int:
    """Busy ticks in /proc/stat's aggregate "cpu" line (user nice system idle iowait irq
    softirq steal guest guest_nice): every field but idle and iowait (waiting, not working),
    and but guest and guest_nice, which the kernel already counts in user and nice."""
    name, *values = proc_stat.splitlines()[0].split()
    if name != "cpu":
        raise ValueError(f"/proc/stat does not open with the aggregate cpu line: {name!r}")
    ticks = [int(value) for value in values]
    return sum(ticks[:8]) - ticks[3] - ticks[4]


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used so far."""
    return _stat_fields(pid)[0] * TICK_S


def _stat_fields(pid: int) -> tuple[int, int]:
    """(utime + stime, starttime) in ticks, from /proc/PID/stat; the command name in
    parentheses may hold spaces, so the fields are counted after its closing one."""
    fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[19])


def is_postgres(pid: int) -> bool:
    """A PostgreSQL server process: the postmaster and what it forks (comm `postgres`), or a
    process whose title PostgreSQL has set (`postgres: ...`)."""
    if (PROC / str(pid) / "comm").read_text().strip() == "postgres":
        return True
    return (PROC / str(pid) / "cmdline").read_bytes().startswith(b"postgres:")


def postgres_processes() -> dict[Identity, float]:
    """CPU seconds so far of every PostgreSQL server process now running."""
    found = {}
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            if is_postgres(int(entry)):
                ticks, started = _stat_fields(int(entry))
                found[(int(entry), started)] = ticks * TICK_S
        except (FileNotFoundError, ProcessLookupError):  # it exited while we looked
            continue
    return found


def used_s(
    before: dict[Identity, float], after: dict[Identity, float], excluded: set[int]
) -> float:
    """CPU seconds the processes of `after` used since `before`, but for the pids `excluded`.
    One absent from `before` started in between: all its CPU counts. One in `before` that
    exited before `after` is not seen: its share is lost (PostgreSQL backends live as long as
    their connection, so in the bench the pool's connections, opened before the clock, stay)."""
    return sum(
        cpu - before.get(identity, 0.0)
        for identity, cpu in after.items()
        if identity[0] not in excluded
    )


@dataclass
class FleetReading:
    """The CPU seconds so far of some processes (in order) and, if asked, PostgreSQL's."""

    processes: list[float]
    postgres: dict[Identity, float] = field(default_factory=dict)


def read_fleet(pids: list[int], postgres: bool) -> FleetReading:
    return FleetReading(
        [process_cpu_s(pid) for pid in pids], postgres_processes() if postgres else {}
    )


def peak_rss_mb(pid: int) -> float:
    """A live process's peak resident memory (VmHWM of /proc/PID/status), in MB. Not
    getrusage's RUSAGE_CHILDREN: its ru_maxrss survives exec, so a child forked from a parent
    of 250 MB reports 250 MB however little it uses after exec."""
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"/proc/{pid}/status has no VmHWM line")
