"""A soft warning for hand-written modules over about 600 lines (``make lint`` runs it).

It never fails: a module is split when it holds two jobs, not when it is long. Complexity
is held by ruff's C901 and PLR0912/PLR0915 rules (``[tool.ruff.lint]`` in pyproject.toml);
this only points at modules worth a second look. The generated gRPC stubs are skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOFT_LIMIT = 600
GENERATED = ROOT / "node" / "protocol" / "starling"


def long_modules(limit: int = SOFT_LIMIT) -> dict[str, int]:
    """Path (from the repository root) -> line count, for every module over ``limit``."""
    found = {}
    for package in ("node", "orchestrator"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if GENERATED in path.parents:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def main() -> int:
    for path, lines in long_modules().items():
        print(f"warning: {path} has {lines} lines (over {SOFT_LIMIT}): does it hold one job?")
    return 0


if __name__ == "__main__":
    sys.exit(main())
