"""``python -m host_driver.cli``: the ``ainic`` command from a checkout."""

import sys

from host_driver.cli import main

sys.exit(main())
