"""`python -m turngate`: the `turngate` command, where no script is on PATH."""

import sys

from turngate.service.cli import main

sys.exit(main())
