"""``python -m cumm``: the command line (see ``cumm._cli``)."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m cumm"))
