"""YAML read as input: node configs, inventories, experiment and study files.

PyYAML's safe loader (its C parser when libyaml is there, four times faster on a long
fault list), with what it lets through refused in one line naming the file:

* a key given twice in one mapping (YAML says keys are unique; PyYAML keeps the last, so a
  second ``a:`` of an inventory silently replaced the first);
* a key that is a list or a mapping (``? [a, b]``), which PyYAML cannot hash: a TypeError
  and its traceback;
* an integer of more digits than Python converts (4300): a ValueError and its traceback;
* a text longer than :data:`MAX_BYTES`;
* values nested deeper than :data:`MAX_DEPTH`;
* aliases that expand to more than :data:`MAX_VALUES` values, or into themselves. A file
  of nested aliases ("billion laughs") is a few shared objects to PyYAML, but every reader
  after it walks every path through them: the schema's checks, a field's value shown in an
  error line. Those walks never ended.

The composed document is measured before any Python object is built from it, once per
shared node, so the bound costs one pass over what the file actually holds; a file with no
anchor (``&``) shares nothing, and only its depth is measured.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from starling.node.params import ConfigError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "load_yaml", "read_yaml"]

MAX_BYTES = 64 * 1024 * 1024
"""The longest text read: a fault list of a million entries is about 50 MB."""
MAX_DEPTH = 100
"""The deepest nesting of lists and mappings (an experiment file is five deep)."""
MAX_VALUES = 5_000_000
"""The most values a file may stand for once its aliases are expanded (a fault list of
10⁵ entries holds about a million)."""

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_Base):  # type: ignore[misc]
    """The safe loader, refusing a key given twice in one mapping, and a key that is a list
    or a mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # ``? [a, b]`` or ``{[a]: 1}``: PyYAML's TypeError
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "a key must be a name or a number, not a "
                    + ("mapping" if isinstance(key, dict) else type(key).__name__),
                    key_node.start_mark,
                )
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        result: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return result

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer; one of more digits than Python converts (4300) was PyYAML's
        ValueError and its traceback."""
        try:
            value: int = super().construct_yaml_int(node)
        except ValueError:
            digits = sum(c.isdigit() for c in str(node.value))
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {digits:,} digits is too long", node.start_mark
            ) from None
        return value


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def _measure(root: yaml.Node, where: str) -> None:
    """Refuse a document nested too deeply, or whose aliases expand too far (or into
    themselves). Iterative: a document deeper than Python's stack is measured too."""
    size: dict[int, int] = {}  # node id -> values it stands for, expanded
    depth: dict[int, int] = {}  # node id -> its nesting depth below it
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if depth[key] > MAX_DEPTH:
                raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep")
            if size[key] > MAX_VALUES:
                raise ConfigError(
                    f"{where}: its aliases expand to more than {MAX_VALUES:,} values; "
                    "write the values out, or share fewer"
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise ConfigError(f"{where}: an alias refers to the value that holds it")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in size)


def _depth(root: yaml.Node, where: str) -> None:
    """Refuse a document (a tree: nothing in it is shared) nested too deeply."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.MappingNode):
            stack.extend((part, depth + 1) for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def load_yaml(text: str, where: str) -> Any:
    """The value of one YAML document, or a ConfigError naming ``where`` (the file) and,
    for a YAML mistake, its line and column."""
    if len(text) > MAX_BYTES:
        raise _too_long(where)
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "&" in text:  # an alias needs an anchor: without one, nothing is shared
            _measure(node, where)
        else:
            _depth(node, where)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        problem = exc.problem or exc.context or "not valid YAML"
        if "nesting depth" in problem:
            raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
        raise ConfigError(f"{at}: not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "not valid YAML"
        raise ConfigError(f"{where}: not valid YAML: {reason}") from None
    finally:
        loader.dispose()


def _too_long(where: str) -> ConfigError:
    return ConfigError(f"{where}: longer than {MAX_BYTES // 2**20} MiB; not a file to read")


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """:func:`load_yaml` of a UTF-8 file; ``what`` names it in the error for a file that
    is not there (``experiment file``, ``--inventory``)."""
    file = Path(path)
    if not file.is_file():
        if file.is_dir():
            how = "is a folder, not a file"
        elif file.exists():  # a device, a pipe: reading it may never end
            how = "is not a regular file"
        else:
            how = "does not exist"
        raise ConfigError(f"{what} {str(path)!r} {how}")
    try:
        with open(file, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise _too_long(str(file))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{file}: not a text file (byte {exc.start} is not UTF-8); expected YAML"
        ) from None
    return load_yaml(text, str(file))
