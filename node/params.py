"""Turn loose mappings (YAML, protobuf Struct) into typed frozen dataclasses.

Errors name the field with its full path (``hyperparameters.rho``), which is what a user
editing an experiment file needs to see. protobuf's Struct carries every number as a
float, so whole floats are accepted where an int is declared.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["ConfigError", "parse_params", "describe_params"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the field."""


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: unexpected value {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args else Any
        return tuple(_coerce(v, item, f"{where}[{k}]") for k, v in enumerate(value))
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def parse_params(cls: type[T], values: Mapping[str, Any] | None, where: str) -> T:
    """Build ``cls`` (a dataclass) from ``values``; unknown or mistyped keys raise ConfigError."""
    values = dict(values or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown field (known: {', '.join(sorted(fields)) or 'none'})"
        )
    kwargs = {}
    for name, f in fields.items():
        if name in values:
            kwargs[name] = _coerce(values[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{name}: required field is missing")
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
