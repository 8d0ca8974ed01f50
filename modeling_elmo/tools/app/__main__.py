"""`python -m modeling_elmo.tools.app`: the `elmo-app` command."""

import sys

from .server import main

sys.exit(main())
