"""``python -m gputop`` runs the command line."""

import sys

from gputop.cli import main

sys.exit(main())
