"""`python -m turngate`: the `turngate` command, where no script is on PATH."""

import sys

from turngate.service.entry import main

sys.exit(main())
