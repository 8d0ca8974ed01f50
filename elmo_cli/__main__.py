"""`python -m elmo_cli COMMAND [options]`: any console command of the project (`elmo_cli.main`)."""

import sys

from . import main

sys.exit(main())
