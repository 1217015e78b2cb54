"""A PostgreSQL cluster of its own inside a test host (a network namespace, tests/support/netns.py).

The development server listens on the root namespace's 127.0.0.1 only, which no test host can
reach; a cluster started inside the database host listens on that host's link addresses, so
cutting a link cuts the database off for real. It is made with Debian's binaries
(/usr/lib/postgresql/<newest>/bin), runs as the `postgres` user (PostgreSQL refuses root),
trusts every connection (a throw-away test cluster) and skips fsync (nothing here must survive
a power cut). Its Unix socket is a file, which namespaces do not separate: the test itself,
in the root namespace, reads the database through it without being a host on any link.
"""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.netns import Host

PORT = 5432
USER = "postgres"
SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


def server_bin() -> Path:
    """The newest installed server's binaries."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=_major)
    if not versions:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return versions[-1].parent


def _major(path: Path) -> int:
    return int(path.parts[-3]) if path.parts[-3].isdigit() else 0


@dataclass
class PostgresHost:
    host: Host
    folder: Path  # owned by the postgres user: data, socket, log

    @classmethod
    def start(cls, host: Host, listen: Sequence[str], prefix: str) -> PostgresHost:
        """initdb a fresh cluster and start it in `host`, listening on `listen`; returns once
        it accepts connections (`pg_ctl -w`)."""
        # Not under pytest's tmp_path: its base folder is its user's alone (mode 0700).
        folder = Path(tempfile.mkdtemp(prefix=f"{prefix}-pg-"))
        account = pwd.getpwnam(USER)
        shutil.chown(folder, account.pw_uid, account.pw_gid)
        cluster = cls(host, folder)
        cluster.socket_dir.mkdir()
        shutil.chown(cluster.socket_dir, account.pw_uid, account.pw_gid)
        binaries = server_bin()
        as_postgres = ["runuser", "-u", USER, "--"]
        _check(
            [
                *as_postgres,
                str(binaries / "initdb"),
                "-D",
                str(cluster.data),
                "-U",
                USER,
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            "initdb",
        )
        with (cluster.data / "pg_hba.conf").open("a") as hba:  # the linked hosts, trusted too
            hba.writelines(f"host all all {address}/30 trust\n" for address in listen)
        options = {
            **SETTINGS,
            "listen_addresses": ",".join(listen),
            "port": str(PORT),
            "unix_socket_directories": str(cluster.socket_dir),
        }
        flags = " ".join(f"-c {key}={value}" for key, value in options.items())
        _check(
            host.argv(
                [
                    *as_postgres,
                    str(binaries / "pg_ctl"),
                    "-D",
                    str(cluster.data),
                    "-l",
                    str(cluster.log),
                    "-w",
                    "-t",
                    "300",
                    "-o",
                    flags,
                    "start",
                ]
            ),
            "pg_ctl start",
        )
        return cluster

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def url(self, address: str) -> str:
        """The URL for a host linked to this one, through `address` (this host's end)."""
        return f"postgresql://{USER}@{address}:{PORT}/postgres"

    def socket_url(self) -> str:
        """The URL through the Unix socket: for the test itself, outside every link."""
        return f"postgresql://{USER}@/postgres?host={self.socket_dir}&port={PORT}"

    def stop(self) -> None:
        """Stop at once (nothing to keep) and remove the folder."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    USER,
                    "--",
                    str(server_bin() / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(self.folder, ignore_errors=True)


def _check(args: Sequence[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
