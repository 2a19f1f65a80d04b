"""Ships the top-level ``examples/`` inside the wheel as ``orchestrator/examples/``.

Everything else is in pyproject.toml. The examples stay at the top of the source tree where
the README points; :mod:`orchestrator.shipped` finds them in either place.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithExamples(build_py):
    def run(self):
        super().run()
        source = Path(__file__).resolve().parent / "examples"
        target = Path(self.build_lib) / "orchestrator" / "examples"
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.glob("*.yaml")):
            shutil.copy2(path, target / path.name)


setup(cmdclass={"build_py": BuildWithExamples})
