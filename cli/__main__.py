"""`python -m elmo_hf.cli COMMAND [options]`: any console command of the project (`elmo_hf.cli.main`)."""

import sys

from . import main

sys.exit(main())
