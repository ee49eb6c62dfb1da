"""``python -m cumm``: the command line (see ``cumm.tools.cli``)."""

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m cumm"))
