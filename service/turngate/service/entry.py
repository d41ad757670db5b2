# PYTHON_ARGCOMPLETE_OK (argcomplete's global activation looks for this marker in the entry point's module)
"""The `turngate` command's entry point (the console script's, and `python -m turngate`'s)."""

from __future__ import annotations

import gc


def main() -> int:
    """`cli.main`, its modules imported with the garbage collector paused: what an import makes
    lives as long as the process, so collecting among it only costs time, a tenth of every start
    (docs/decisions.md, "The garbage collector")."""
    gc.disable()
    try:
        from turngate.service.cli import main as run
    finally:
        gc.freeze()
        gc.enable()
    return run()
