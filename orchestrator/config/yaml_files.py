"""Reading an experiment or study file: YAML, safely and strictly, in one clear line on error.

PyYAML's safe loader, with two things refused that it lets through: a key given twice in
one mapping (YAML says keys are unique; PyYAML keeps the last), and a value nested deeper
than its parser can follow. :func:`refuse_non_finite` then refuses ``.inf``/``.nan``
anywhere, looking at each shared (aliased) node once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from starling.node.params import ConfigError

__all__ = ["read_yaml_file", "refuse_non_finite"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping: YAML says keys are
    unique, and PyYAML would silently keep the last (``rounds: 10`` then, forgotten lower
    down, ``rounds: 10000``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml_file(path: str | Path) -> Any:
    """The parsed content of an experiment (or study) file, or a one-line ConfigError
    naming the file (and for a YAML mistake, the line and column)."""
    file = Path(path)
    if not file.is_file():
        what = "is a folder, not a file" if file.is_dir() else "does not exist"
        raise ConfigError(f"experiment file {str(path)!r} {what}")
    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{file}: not a text file (byte {exc.start} is not UTF-8); expected YAML"
        ) from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except RecursionError:
        raise ConfigError(f"{file}: nested too deeply to be an experiment file") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else str(file)
        problem = exc.problem or exc.context or "not valid YAML"
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "not valid YAML"
        raise ConfigError(f"{file}: not valid YAML: {reason}") from None
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
