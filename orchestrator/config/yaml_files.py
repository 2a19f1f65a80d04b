"""Reading an experiment or study file: YAML, safely and strictly, in one clear line on error.

The file is read by :func:`starling.node.yaml_input.read_yaml`, as every YAML file Starling
reads: a key given twice, nesting past its bound and aliases that expand too far are refused
with the file named. :func:`refuse_non_finite` then refuses ``.inf``/``.nan`` anywhere,
looking at each shared (aliased) node once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError
from starling.node.yaml_input import read_yaml

__all__ = ["read_yaml_file", "refuse_non_finite"]


def read_yaml_file(path: str | Path) -> Any:
    """The parsed content of an experiment (or study) file, or a one-line ConfigError
    naming the file (and for a YAML mistake, the line and column)."""
    file = Path(path)
    raw = read_yaml(path, "experiment file")
    if raw is None:
        raise ConfigError(f"{file}: the file is empty; expected a mapping of experiment fields")
    if not isinstance(raw, Mapping):
        what = "a list" if isinstance(raw, list) else f"{type(raw).__name__} {raw!r}"
        raise ConfigError(f"{file}: expected a mapping of experiment fields, got {what}")
    return raw


def refuse_non_finite(value: Any, where: str) -> None:
    """No field anywhere may be .inf or .nan: every sampler would turn it into NaNs.

    Each mapping and list is looked at once, however many YAML aliases point at it: a
    file of nested aliases ("billion laughs") is a few objects shared many times over,
    and walking every path through them would never end."""
    seen: set[int] = set()
    pending = [(value, where)]
    while pending:
        item, at = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"{at or 'experiment'}: expected a finite number, got {item!r}")
        if not isinstance(item, (Mapping, list, tuple)) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            pending += [(v, f"{at}.{k}" if at else str(k)) for k, v in item.items()]
        else:
            pending += [(v, f"{at}[{k}]") for k, v in enumerate(item)]
