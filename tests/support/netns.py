"""Test hosts in Linux network namespaces, joined by veth pairs (tests/chaos/test_netns.py).

Each host is a namespace of its own (its own loopback, addresses, ports, firewall and queues);
a link is a veth pair with one end in each host and a /30 between them, so hosts reach only
the hosts they are linked to. What the kernel here offers to spoil a link (checked by the test):

- packet loss: an nftables rule on the *input* hook of both ends of a link drops a share of its
  TCP packets (`numgen random`); dropped at the receiver, the sender's stack never learns of
  it, as on a lossy wire (a drop on the output hook would return EPERM to the sender);
- delay: `tc netem` is absent from this kernel (CONFIG_NET_SCH_NETEM is not set), so a token
  bucket (`tbf`) on both ends' egress limits the rate, and packets queue behind it: queueing
  delay that grows with the load, measured by the test (ICMP, which the loss rule spares);
- a partition: an nftables table on both ends dropping everything the link carries, removed
  to heal it (a link set down would fail sends at once, which no partition does).

Everything is named after one prefix made per run (`jr` + 6 hex digits) so two runs cannot
collide, and `Lab.close` removes it all, namespaces last: the processes still inside are
killed by pid, the nftables tables and veths go with their namespaces and are checked gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

IP = "ip"
VETH_GONE_S = 30.0
NFT_MISSING = (
    "the nft command is missing: install nftables (apt-get install -y nftables; .ci/run does)"
)


class NamespacesUnavailable(Exception):
    """This machine cannot make network namespaces (not root, no CAP_SYS_ADMIN, no iproute2)."""


def _run(args: Sequence[str], *, stdin: str | None = None) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def check_namespaces() -> None:
    """Raise NamespacesUnavailable with the reason when a namespace cannot be made here."""
    if shutil.which(IP) is None:
        raise NamespacesUnavailable("the ip command (iproute2) is not installed")
    name = f"jrprobe{uuid.uuid4().hex[:6]}"
    done = subprocess.run([IP, "netns", "add", name], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise NamespacesUnavailable(f"ip netns add failed: {done.stderr.strip()}")
    _run([IP, "netns", "delete", name])


@dataclass(frozen=True)
class Host:
    """One namespace: commands run in it through `ip netns exec`, which execs (same pid)."""

    name: str

    def argv(self, args: Sequence[str]) -> list[str]:
        return [IP, "netns", "exec", self.name, *args]

    def run(self, *args: str, stdin: str | None = None) -> str:
        return _run(self.argv(args), stdin=stdin)

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(args), **kwargs)

    def nft(self, script: str) -> None:
        self.run("nft", "-f", "-", stdin=script)

    def nft_counters(self, table: str) -> int:
        """Packets counted by every `counter` of an inet table of this host."""
        listing = json.loads(self.run("nft", "-j", "list", "table", "inet", table))
        return sum(
            expr["counter"]["packets"]
            for item in listing["nftables"]
            for expr in item.get("rule", {}).get("expr", [])
            if "counter" in expr
        )

    def pids(self) -> list[int]:
        return [int(pid) for pid in _run([IP, "netns", "pids", self.name]).split()]


@dataclass(frozen=True)
class End:
    host: Host
    device: str
    address: str


@dataclass(frozen=True)
class Link:
    """A veth pair between two hosts: `a` and `b` are its ends."""

    a: End
    b: End

    def ends(self) -> tuple[End, End]:
        return (self.a, self.b)


LOSS_TABLE = "jrloss"
PARTITION_TABLE = "jrpartition"


@dataclass
class Lab:
    """The hosts and links of one run; `close()` removes all of it."""

    prefix: str = field(default_factory=lambda: f"jr{uuid.uuid4().hex[:6]}")
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def host(self, role: str) -> Host:
        host = Host(f"{self.prefix}-{role}")
        _run([IP, "netns", "add", host.name])
        self.hosts.append(host)
        host.run(IP, "link", "set", "lo", "up")
        return host

    def link(self, a: Host, b: Host) -> Link:
        """A veth pair with 10.31.<n>.1 on `a` and 10.31.<n>.2 on `b` (n: the link's number;
        the addresses live in this run's namespaces only, so runs cannot collide on them)."""
        n = len(self.links) + 1
        link = Link(
            End(a, f"{self.prefix}l{n}a", f"10.31.{n}.1"),
            End(b, f"{self.prefix}l{n}b", f"10.31.{n}.2"),
        )
        _run(
            [
                IP,
                "link",
                "add",
                link.a.device,
                "netns",
                a.name,
                "type",
                "veth",
                "peer",
                "name",
                link.b.device,
                "netns",
                b.name,
            ]
        )
        self.links.append(link)
        for end in link.ends():
            end.host.run(IP, "addr", "add", f"{end.address}/30", "dev", end.device)
            end.host.run(IP, "link", "set", end.device, "up")
        return link

    def lose(self, link: Link, per_mille: int) -> None:
        """Drop `per_mille`/1000 of the TCP packets arriving at either end of `link`."""
        if shutil.which("nft") is None:
            raise RuntimeError(NFT_MISSING)
        for end in link.ends():
            end.host.nft(
                f"table inet {LOSS_TABLE} {{\n chain input {{\n"
                " type filter hook input priority 0;\n"
                f' iifname "{end.device}" meta l4proto tcp numgen random mod 1000 < {per_mille}'
                " counter drop\n }\n}\n"
            )

    def lost_packets(self, link: Link) -> int:
        return sum(end.host.nft_counters(LOSS_TABLE) for end in link.ends())

    def shape(self, link: Link, rate: str, burst: str, latency: str) -> None:
        """A token bucket on both ends' egress: at most `rate`, packets queue behind it (up to
        `latency` of queue; beyond, tbf drops)."""
        for end in link.ends():
            end.host.run(
                "tc",
                "qdisc",
                "add",
                "dev",
                end.device,
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                burst,
                "latency",
                latency,
            )

    def shaper_drops(self, link: Link) -> int:
        """Packets the token buckets of `link` dropped (their queue was full)."""
        total = 0
        for end in link.ends():
            stats = json.loads(end.host.run("tc", "-s", "-j", "qdisc", "show", "dev", end.device))
            total += sum(int(qdisc.get("drops", 0)) for qdisc in stats)
        return total

    def partition(self, link: Link) -> None:
        """Every packet of `link` dropped, both ways, at both ends, until `heal`."""
        for end in link.ends():
            end.host.nft(
                f"table inet {PARTITION_TABLE} {{\n chain input {{\n type filter hook input"
                f' priority -10;\n iifname "{end.device}" counter drop\n }}\n}}\n'
            )

    def partition_drops(self, link: Link) -> int:
        return sum(end.host.nft_counters(PARTITION_TABLE) for end in link.ends())

    def heal(self, link: Link) -> None:
        for end in link.ends():
            end.host.run("nft", "delete", "table", "inet", PARTITION_TABLE)

    def close(self) -> list[str]:
        """Kill what still runs in the hosts (by pid), delete the namespaces (their veths and
        nftables tables go with them); what could not be removed, as messages."""
        left: list[str] = []
        for host in self.hosts:
            for pid in host.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                _run([IP, "netns", "delete", host.name])
            except RuntimeError as exc:
                left.append(str(exc))
        named = _run([IP, "netns", "list"]).split()
        left.extend(f"namespace {name} still exists" for name in named if self.prefix in name)
        # A namespace is torn down by the kernel after its last process is reaped, on a work
        # queue: its veths disappear a moment later. Wait for that (a guard, not a verdict).
        deadline = time.monotonic() + VETH_GONE_S
        while (devices := self._devices_left()) and time.monotonic() < deadline:
            time.sleep(0.05)
        left.extend(f"veth {device} still exists" for device in devices)
        return left

    def _devices_left(self) -> list[str]:
        listing = _run([IP, "-o", "link", "show"]).splitlines()
        return [line.split(":")[1].strip() for line in listing if self.prefix in line]
