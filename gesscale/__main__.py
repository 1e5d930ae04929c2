"""`python -m gesscale` is the same as the `gesscale` command."""

import sys

from gesscale.cli import main

sys.exit(main())
