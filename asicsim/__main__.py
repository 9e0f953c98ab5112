"""``python -m asicsim``: the same as the ``asicsim`` command."""

import sys

from asicsim.cli import main

sys.exit(main())
