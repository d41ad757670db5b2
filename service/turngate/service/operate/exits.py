"""The exit codes of the `turngate` command, one list for the code, --help and docs/cli.md."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    MISMATCH = 3
    IDLE = 4
    NOT_FOUND = 5
    UNAUTHENTICATED = 6
    PERMISSION_DENIED = 7
    NOT_STARTED = 8
    OUTCOME_UNKNOWN = 9
    INTERRUPTED = 130


MEANINGS = {
    ExitCode.OK: "done (stop: a running turn was stopped; steer: the running turn got the text)",
    ExitCode.FAILURE: "failure: the service (serve: its store or port) is unavailable, or a bug",
    ExitCode.USAGE: "bad usage, setting or argument (the service's INVALID_ARGUMENT too)",
    ExitCode.MISMATCH: "stop, steer: another turn is active (steer: or the turn is stopping); queue move: "
    "the queue changed since --expect-version; nothing changed",
    ExitCode.IDLE: "stop, steer: nothing is active; nothing changed",
    ExitCode.NOT_FOUND: "turn show: the turn was never admitted (queue move: it is not waiting in the queue)",
    ExitCode.UNAUTHENTICATED: "not authenticated: no token, or one the service does not know",
    ExitCode.PERMISSION_DENIED: "permission denied: the token's principal lacks the role or the project",
    ExitCode.NOT_STARTED: "stop: the turn named had not started (or was queued): it will not run; "
    "nothing running was stopped (steer --enqueue: the text was queued as a turn of its own)",
    ExitCode.OUTCOME_UNKNOWN: "the service could not confirm a change it was sent: it may have taken effect; "
    "run the same command again (with the --request-id it names) to learn what it did",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, SIGTERM) before finishing; watch and serve end so, with 0",
}

EPILOG = "exit codes:\n" + "\n".join(f"  {int(code)}  {meaning}" for code, meaning in MEANINGS.items())
