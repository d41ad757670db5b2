"""The private Unix socket through which the HTTP listener reaches this process's gRPC server: in
a fresh directory only this user may enter, named after this process, so that a later start can
tell a directory a killed process left behind (its process is gone) from one in use, and
remove it."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "turngate-bridge-"


class PrivateSocket:
    """A new directory for the socket; stale ones of this user are removed first."""

    def __init__(self) -> None:
        temp = Path(tempfile.gettempdir())
        for stale in _left_behind(temp):
            shutil.rmtree(stale, ignore_errors=True)
        self.directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=temp))
        self.target = f"unix:{self.directory / 'grpc.sock'}"

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _left_behind(temp: Path) -> list[Path]:
    """This user's socket directories (not links to one) whose process no longer runs."""
    found = []
    for directory in temp.glob(f"{PREFIX}*-*"):
        pid = directory.name.removeprefix(PREFIX).split("-", 1)[0]
        try:
            status = directory.lstat()
        except FileNotFoundError:
            continue
        if (
            stat.S_ISDIR(status.st_mode)
            and status.st_uid == os.getuid()
            and pid.isdigit()
            and not _runs(int(pid))
        ):
            found.append(directory)
    return found


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True
