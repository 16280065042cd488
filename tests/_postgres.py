"""A real PostgreSQL server for the tests: started once per test session (per xdist worker).

``initdb`` into a temp dir, ``pg_ctl start`` on a free loopback port with its unix socket in
that dir, stopped at the end. As root the server runs as the ``postgres`` user (``initdb``
refuses root). Without the server binaries the tests that need it skip, naming the install
command; with ``AGENTKIT_REQUIRE_POSTGRES=1`` (``.ci/run``) they fail instead.

Each test gets its own schema (:func:`fresh_url`): the stores' tables are created there by
their migrations, so tests share one server without seeing each other's rows.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: read at import (collection), before the suite's autouse fixture clears AGENTKIT_* variables
REQUIRED = os.environ.get("AGENTKIT_REQUIRE_POSTGRES") == "1"
INSTALL_HINT = "apt-get install postgresql (Debian's server binaries: initdb, pg_ctl)"


def _bindir() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name),
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class PostgresServer:
    """A running test server: ``url`` reaches its ``postgres`` database over TCP."""

    bindir: Path
    data: Path
    port: int
    user: str
    run_as: tuple[str, ...]
    options: str = ""

    def start(self) -> None:
        """Start it again after a ``stop`` (same port, same settings)."""
        self.ctl("start", "-o", self.options, "-l", str(self.data.parent / "server.log"))

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str, timeout: float = 60) -> None:
        """``pg_ctl ARGS`` on this server (``restart -m immediate``, ``stop``, …)."""
        subprocess.run(
            [*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", *args],
            check=True,
            capture_output=True,
            timeout=timeout,
        )


def _start() -> tuple[PostgresServer, Path]:
    bindir = _bindir()
    if bindir is None:
        raise FileNotFoundError(f"no PostgreSQL server binaries: {INSTALL_HINT}")
    base = Path(tempfile.mkdtemp(prefix="agentkit-pg-"))
    run_as: tuple[str, ...] = ()
    user = pwd.getpwuid(os.getuid()).pw_name
    if os.geteuid() == 0:  # initdb refuses root: run the server as postgres
        entry = pwd.getpwnam("postgres")
        os.chown(base, entry.pw_uid, entry.pw_gid)
        run_as, user = ("runuser", "-u", "postgres", "--"), "postgres"
    data = base / "data"
    subprocess.run(
        [*run_as, str(bindir / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
         "-E", "UTF8", "--locale=C", "--no-sync"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = _free_port()
    options = (
        f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={base} "
        "-c fsync=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB"
    )
    server = PostgresServer(bindir, data, port, user, run_as, options)
    server.start()
    return server, base


def _watchdog(server: PostgresServer, base: Path) -> subprocess.Popen[bytes]:
    """Stops the server should this process die without stopping it (a crashed worker)."""
    ctl = " ".join([*server.run_as, str(server.bindir / "pg_ctl")])
    script = (
        f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
        f"{ctl} -D {server.data} stop -m immediate; rm -rf {base}"
    )
    return subprocess.Popen(
        ["sh", "-c", script],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def running_server() -> Iterator[PostgresServer]:
    """Start a server (or skip/fail as the module docstring says); stop it at the end."""
    try:
        server, base = _start()
    except (FileNotFoundError, KeyError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        reason = f"PostgreSQL is not available: {error} {detail.decode(errors='replace')}"
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(f"{reason} ({INSTALL_HINT})")
    watchdog = _watchdog(server, base)
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            server.ctl("stop", "-m", "fast")
        watchdog.kill()
        watchdog.wait()
        shutil.rmtree(base, ignore_errors=True)


def fresh_url(server: PostgresServer) -> str:
    """The server's URL with a new, empty schema as the search path (one per test)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return f"{server.url}?options=-csearch_path%3D{schema}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with running_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A URL whose schema is this test's alone."""
    return fresh_url(postgres_server)
