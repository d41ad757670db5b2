"""How the examples end: their exit codes, and the one line (never a traceback) for each error the
SDK may raise that an example does not handle as part of its story.

    0    done
    1    the service could not be reached, or failed (one line on stderr says how)
    2    the service refused the request as invalid (INVALID_ARGUMENT)
    3    refused: the turn was not admitted, or the Stop found another turn (nothing changed)
    4    demo_stop.py: nothing was running (nothing changed)
    6    not authenticated: no token, or one the service does not know
    7    permission denied: the token's principal lacks the role or the project
    8    demo_stop.py: the turn named had not started: it will not run; nothing running was stopped
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from enum import IntEnum
from typing import Any, TypeVar

from turngate.client import (
    InvalidRequest,
    NotAuthenticated,
    PermissionDenied,
    ServiceUnavailable,
    TurngateError,
)

T = TypeVar("T")


class Exit(IntEnum):
    OK = 0
    FAILURE = 1
    INVALID = 2
    REFUSED = 3
    IDLE = 4
    NOT_AUTHENTICATED = 6
    PERMISSION_DENIED = 7
    NOT_STARTED = 8
    INTERRUPTED = 130


class Unexpected(Exception):
    """The service answered otherwise than a scripted example expects (exit code 1)."""


def expect(answer: object, kind: type[T]) -> T:
    """`answer`, which the script expects to be a `kind`; else `Unexpected`."""
    if not isinstance(answer, kind):
        raise Unexpected(f"expected {kind.__name__}, the service answered {answer!r}")
    return answer


def fail(message: str, code: Exit) -> Exit:
    print(f"{sys.argv[0]}: {message}", file=sys.stderr)
    return code


def run(main: Coroutine[Any, Any, Exit], target: str, *, interrupted: Exit = Exit.INTERRUPTED) -> None:
    """Runs an example's `main` and exits with its code, with `interrupted` after Ctrl-C, or with
    one line and the code of the error that ended it."""
    sys.exit(_ended(main, target, interrupted))


def _ended(main: Coroutine[Any, Any, Exit], target: str, interrupted: Exit) -> Exit:
    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        return interrupted
    except Unexpected as error:
        return fail(str(error), Exit.FAILURE)
    except ServiceUnavailable as error:
        return fail(f"turngate at {target} unavailable ({error.code.name}): {error}", Exit.FAILURE)
    except InvalidRequest as error:
        return fail(f"invalid request: {error}", Exit.INVALID)
    except NotAuthenticated as error:
        return fail(f"not authenticated: {error}", Exit.NOT_AUTHENTICATED)
    except PermissionDenied as error:
        return fail(f"permission denied: {error}", Exit.PERMISSION_DENIED)
    except TurngateError as error:
        return fail(f"{error.code.name}: {error}", Exit.FAILURE)
