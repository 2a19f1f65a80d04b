"""``python -m starling.node serve ...`` — see :mod:`starling.node.cli`."""

from __future__ import annotations

import sys

from starling.node.cli import main

if __name__ == "__main__":
    sys.exit(main())
