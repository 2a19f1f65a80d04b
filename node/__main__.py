"""``python -m node serve ...`` — see :mod:`node.cli`."""

from __future__ import annotations

import sys

from node.cli import main

if __name__ == "__main__":
    sys.exit(main())
