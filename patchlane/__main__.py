"""``python -m patchlane``: the ``patchlane`` command."""

import sys

from .cli.entry import main

sys.exit(main())
