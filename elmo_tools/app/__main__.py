"""`python -m elmo_tools.app`: the `elmo-app` command."""

import sys

from .server import main

sys.exit(main())
