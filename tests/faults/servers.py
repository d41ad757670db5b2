"""Private PostgreSQL and Redis servers, started by the fault tests on free ports so they can stop
and restart them without touching anything shared."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.processes import free_port

# How long a server may take to start or stop: reached only when a test fails.
START_TIMEOUT_S = 30
# PostgreSQL refuses to run as root: as root, the server runs as this system user.
POSTGRES_USER = "postgres"


class PrivatePostgres:
    """A PostgreSQL cluster of its own in `root` (trust auth, user postgres, no fsync: tests only)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self._as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(root, POSTGRES_USER)
            self._as_owner = ["runuser", "-u", POSTGRES_USER, "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.root / "postgres.log")
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            log,
            "-o",
            options,
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        )

    def stop(self) -> None:
        """Stops it the hard way (no checkpoint, connections cut), as a crash would."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as_owner, *command], check=True, capture_output=True, timeout=START_TIMEOUT_S)


class PrivateRedisServer:
    """A `redis-server` of its own on a free port and in `root`, persisting as `PERSISTENCE` says."""

    PERSISTENCE: tuple[str, ...] = ()

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Starts it on its port and directory, and returns once it answers (its AOF loaded), itself."""
        log = self.root / "redis-server.log"
        with log.open("ab") as output:
            self._process = subprocess.Popen(
                [
                    *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                    *("--dir", str(self.root), "--save", ""),
                    *self.PERSISTENCE,
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        with Redis.from_url(self.url) as client:
            while True:
                # Its own answer, not another server's that holds the port (then this one exits).
                with contextlib.suppress(RedisConnectionError):  # refused, or still loading its AOF
                    if client.info("server")["process_id"] == self._process.pid:
                        return
                assert self._process.poll() is None, f"redis-server exited:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"redis-server did not answer:\n{log.read_text()}"
                time.sleep(0.01)

    def freeze(self) -> None:
        """SIGSTOP: it keeps its socket open, and what is sent to it waits there, unread."""
        assert self._process is not None, "redis-server is not running"
        self._process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: it reads and runs what waited for it."""
        assert self._process is not None, "redis-server is not running"
        self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as when its machine dies: no shutdown code runs."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(START_TIMEOUT_S)
            self._process = None


class DurableRedis(PrivateRedisServer):
    """One that appends every write to its AOF and fsyncs it before answering, so what it
    acknowledged survives a SIGKILL; `start` again loads it back."""

    # Events over 100 ms are kept (LATENCY LATEST), for a test that must say why Redis was slow.
    PERSISTENCE = ("--appendonly", "yes", "--appendfsync", "always", "--latency-monitor-threshold", "100")


class VolatileRedis(PrivateRedisServer):
    """One without persistence: started again after `kill`, it has lost everything, as a Redis
    restarted without AOF or snapshots (or a failover to an empty replica) has."""

    PERSISTENCE = ("--appendonly", "no")
