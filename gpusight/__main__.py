"""``python -m gpusight`` runs the command line."""

import sys

from gpusight.cli import main

sys.exit(main())
