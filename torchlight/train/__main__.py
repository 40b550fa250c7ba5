"""``python -m torchlight.train``: the command line of :mod:`torchlight.train.cli`."""

import sys

from torchlight.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
