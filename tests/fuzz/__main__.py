"""``python -m tests.fuzz``: see :mod:`tests.fuzz.run`."""

import sys

from tests.fuzz.run import main

sys.exit(main())
