"""`python -m lionmsg`: the `lionmsg` command (lionmsg.cli), for an environment without its script."""

import sys

from lionmsg.cli import main

sys.exit(main())
