"""Installs ``node/`` and ``orchestrator/`` as ``starling.node`` and ``starling.orchestrator``,
and ships the top-level ``examples/`` inside the wheel as ``starling/orchestrator/examples/``.

Everything else is in pyproject.toml. The examples stay at the top of the source tree where
the README points; :mod:`starling.orchestrator.config.shipped` finds them in either place.
"""

import shutil
from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py


class BuildWithExamples(build_py):
    def run(self):
        super().run()
        source = Path(__file__).resolve().parent / "examples"
        target = Path(self.build_lib) / "starling" / "orchestrator" / "examples"
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.glob("*.yaml")):
            shutil.copy2(path, target / path.name)


TOP_PACKAGES = ("node", "orchestrator")
"""The source folders, each installed as ``starling.<folder>``."""


def namespaced_packages() -> list[str]:
    """Every package under the source folders, named as installed (``starling.node.runtime``)."""
    found = []
    for top in TOP_PACKAGES:
        found.append(f"starling.{top}")
        # Namespace-style, so data folders (models/datasets) are packages too and ship.
        subs = find_namespace_packages(top, exclude=["*__pycache__*"])
        found += [f"starling.{top}.{sub}" for sub in subs]
    return found


setup(
    package_dir={f"starling.{top}": top for top in TOP_PACKAGES},
    packages=namespaced_packages(),
    cmdclass={"build_py": BuildWithExamples},
)
