"""Turn loose mappings (YAML, protobuf Struct) into a parameter dataclass, field by field.

A sampler's hyperparameters and a model's parameters are plain ``Params`` dataclasses whose
fields are scalars (``int``, ``float``, ``bool``, ``str``), tuples of them and optional
(``| None``) versions of those. :func:`parse_params` checks a mapping against such a class
and builds it; a mistake becomes one :class:`ConfigError` line that starts with the dotted
field path (``hyperparameters.rho: expected a number, got 'five'``).

The checks are strict where YAML would otherwise be guessed at: a string is never a number, a
number never a boolean, and no number may be infinite or NaN. protobuf's Struct carries every
number as a float, so a whole float is accepted where an int is declared; an int given for a
float becomes a float.

This is hand-written rather than pydantic (which the orchestrator's experiment schema uses,
``orchestrator/core/validation.py``, with the same rules and the same messages): building pydantic
models of the parameter classes cost a node 7 MB of its 70 MB (issue 15), for a job this
small. The orchestrator checks an experiment's hyperparameters with this same function.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from starling.node.shown import shorten, shown

__all__ = [
    "ConfigError",
    "check_dimension",
    "describe_params",
    "existing_file",
    "host_port",
    "number_hint",
    "parse_params",
    "plain_name",
]

MAX_NAME = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def plain_name(value: object) -> bool:
    """Whether ``value`` is a name that is also a file, folder and container name: letters,
    digits, ``-``, ``_`` and ``.`` (not first), at most :data:`MAX_NAME` characters. Node
    ids and experiment names end up in paths (``samples/node-ID.npz``); a blank one, or
    one with a space or a ``/``, would put files anywhere or nowhere."""
    return isinstance(value, str) and len(value) <= MAX_NAME and bool(_NAME.fullmatch(value))


T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the field. Values it
    echoes are cut to a readable length (:func:`starling.node.shown.shorten`)."""

    def __init__(self, message: object = "", *rest: object):
        super().__init__(shorten(str(message)), *rest)


def existing_file(path: str | Path, where: str) -> Path:
    """``path`` as a Path if it is a regular file; otherwise a ConfigError naming ``where``
    (the field or option) and the path, and saying what is there instead: a directory
    reported as 'no such file' sent the user after a missing file that was there as a
    folder."""
    file = Path(path)
    try:
        if file.is_file():
            return file
        if file.is_dir():
            raise ConfigError(f"{where}: {str(path)!r} is a directory, not a file")
        if file.exists():
            raise ConfigError(f"{where}: {str(path)!r} is not a regular file")
    except OSError as exc:  # a name longer than the file system takes: not "no such file"
        raise ConfigError(f"{where}: {str(path)!r}: {exc.strerror or exc}") from None
    raise ConfigError(f"{where}: no such file {str(path)!r}")


def host_port(text: Any, where: str, least_port: int = 1) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` (an IPv6 host in brackets, ``[::1]:50051``), or a
    ConfigError naming ``where`` and what is wrong with it: a bare IPv6 address, whose
    port cannot be told from its last group, was looked up as a host name and reported as
    "host name not found"; a host with a space, likewise."""
    if not isinstance(text, str):
        raise ConfigError(f"{where}: expected HOST:PORT, got {shown(text)}")
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{where}: expected HOST:PORT, got {shown(text)}")
    if not port.isdigit() or not least_port <= int(port) <= 65535:
        raise ConfigError(
            f"{where}: expected a port from {least_port} to 65535 after the last ':', "
            f"got {shown(text)}"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if not host or any(c not in "0123456789abcdefABCDEF:." for c in host):
            raise ConfigError(f"{where}: expected an IPv6 address in brackets, got {shown(text)}")
    elif ":" in host:
        raise ConfigError(
            f"{where}: an IPv6 address goes in brackets ([{host}]:{port}), got {shown(text)}"
        )
    if any(c.isspace() for c in host):
        raise ConfigError(f"{where}: a host name has no spaces, got {shown(text)}")
    return host, int(port)


class _Invalid(Exception):
    """One field's value is wrong: ``path`` below the field (``[1]``), and the message."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


def parse_params(cls: type[T], values: Mapping[str, Any] | None, where: str) -> T:
    """Build ``cls`` (a dataclass) from ``values``; unknown or mistyped keys raise ConfigError.

    Fields are checked in the order ``cls`` declares them (the first wrong or missing one is
    reported), then unknown keys. A field left out keeps ``cls``'s default. After the types,
    ``cls``'s own ``__post_init__`` and ``validate()`` check the values together (a
    ``ValueError`` from ``validate`` starts with the field's name).
    """
    if values is not None and not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {shown(values)}")
    values = dict(values or {})
    for key in values:
        if not isinstance(key, str):
            raise ConfigError(f"{where}: field names must be strings, got {shown(key)}")
    fields = _fields_of(cls)
    kwargs: dict[str, Any] = {}
    for name, (annotation, required) in fields.items():
        if name not in values:
            if required:
                raise ConfigError(f"{where}.{name}: required field is missing")
            continue
        try:
            kwargs[name] = _check(annotation, values[name])
        except _Invalid as bad:
            raise ConfigError(f"{where}.{name}{bad.path}: {bad.message}") from None
    for key in values:
        if key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise ConfigError(f"{where}.{key}: unknown field (known: {known})")
    try:
        result = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    check = getattr(result, "validate", None)
    if callable(check):
        try:
            check()
        except ValueError as exc:
            raise ConfigError(f"{where}.{exc}") from None
    return result


def check_dimension(params: Any, dim: int, where: str) -> None:
    """Check ``params`` against the model's dimension, for a class whose fields depend on it
    (a ``check_dimension(dim)`` method raising ``ValueError`` that starts with the field's
    name); other classes pass. The orchestrator calls it before any node starts, the node
    when it builds its program."""
    check = getattr(params, "check_dimension", None)
    if callable(check):
        try:
            check(dim)
        except ValueError as exc:
            raise ConfigError(f"{where}.{exc}") from None


_FIELDS: dict[type, dict[str, tuple[Any, bool]]] = {}


def _fields_of(cls: type) -> dict[str, tuple[Any, bool]]:
    """Name -> (annotation, required) of the dataclass ``cls``'s init fields, made once per
    class; an annotation :func:`_check` cannot check is refused here, on first use."""
    if cls in _FIELDS:
        return _FIELDS[cls]
    hints = typing.get_type_hints(cls)
    fields: dict[str, tuple[Any, bool]] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        _supported(hints[f.name], f"{cls.__name__}.{f.name}")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields[f.name] = (hints[f.name], required)
    _FIELDS[cls] = fields
    return fields


def _supported(annotation: Any, field: str) -> None:
    if annotation in _SCALARS or annotation is type(None):
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) or (origin is tuple and args):
        for arg in args:
            if arg is not Ellipsis:
                _supported(arg, field)
        return
    raise TypeError(f"{field}: parse_params cannot check the type {annotation!r}")


def _check(annotation: Any, value: Any) -> Any:
    """``value`` as ``annotation`` (the types :func:`_supported` allows), or raise _Invalid."""
    scalar = _SCALARS.get(annotation)
    if scalar is not None:
        return scalar(value)
    if annotation is type(None):
        if value is None:
            return None
        raise _Invalid("", f"expected nothing (null), got {shown(value)}")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        return _tuple(args, value)
    # A union: None picks the optional member; otherwise the first member that takes the value,
    # or the first member's complaint (the one that names what was meant).
    members = [a for a in args if a is not type(None)]
    if value is None and len(members) < len(args):
        return None
    first: _Invalid | None = None
    for member in members:
        try:
            return _check(member, value)
        except _Invalid as bad:
            first = first or bad
    assert first is not None
    raise first


def _tuple(args: tuple[Any, ...], value: Any) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, Mapping, set, frozenset)) or not isinstance(value, Iterable):
        raise _Invalid("", f"expected a list, got {shown(value)}")
    items = list(value)
    if len(args) == 2 and args[1] is Ellipsis:
        kinds = [args[0]] * len(items)
    elif len(items) != len(args):
        raise _Invalid("", f"expected a list of {len(args)} items, got {shown(value)}")
    else:
        kinds = list(args)
    out = []
    for index, (kind, item) in enumerate(zip(kinds, items, strict=True)):
        try:
            out.append(_check(kind, item))
        except _Invalid as bad:
            raise _Invalid(f"[{index}]{bad.path}", bad.message) from None
    return tuple(out)


EXACT_INT = 2**53
"""The largest integer a hyperparameter or model parameter may be: they travel to the
nodes in protobuf's Struct, as doubles, which hold every integer up to 2^53 and no more.
``run`` refused a larger one on the wire while ``simulate`` ran it."""


def _int(value: Any) -> int:
    # A string or a boolean is never read as a number: a user who wrote "3" or true meant
    # something else. A whole float is fine (protobuf's Struct has no integers).
    whole: int | None = None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        whole = int(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        if not math.isfinite(number):
            raise _Invalid("", f"expected a finite number, got {shown(value)}")
        if number.is_integer():
            whole = int(number)
    if whole is None:
        raise _Invalid("", f"expected an integer, got {shown(value)}")
    if abs(whole) > EXACT_INT:
        raise _Invalid(
            "", f"expected an integer of at most 2^53 = {EXACT_INT} in size, got {shown(value)}"
        )
    return whole


def _float(value: Any) -> float:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            number = math.inf
        if math.isfinite(number):
            return number
        raise _Invalid("", f"expected a finite number, got {shown(value)}")
    raise _Invalid("", f"expected a number, got {shown(value)}{number_hint(value)}")


def number_hint(value: Any) -> str:
    """For text that reads as a number: why YAML gave text. YAML 1.1 (PyYAML's) takes
    ``1e-3`` as a string, wanting a dot (``1.0e-3``); say so instead of a bare refusal."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return f" (YAML reads {value} as text: write it with a dot, e.g. 1.0e-3)"
    return ""


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _Invalid("", f"expected true or false, got {shown(value)}")


def _str(value: Any) -> str:
    if isinstance(value, str):
        return str(value)
    raise _Invalid("", f"expected a string, got {shown(value)}")


_SCALARS: dict[Any, Any] = {int: _int, float: _float, bool: _bool, str: _str}


# ---------------------------------------------------------------------------------------


def describe_params(cls: type) -> dict[str, dict[str, Any]]:
    """Name -> {type, default} for each field, for ``starling algorithms``."""
    hints = typing.get_type_hints(cls)
    out: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        out[f.name] = {"type": _type_name(hints[f.name]), "default": default}
    return out


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
