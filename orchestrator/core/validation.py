"""The pydantic v2 pieces of the orchestrator's schemas, and pydantic's errors as one line.

The experiment file (``schema.py``), the fault list (``faults.py``) and study files
(``study.py``) are pydantic models built from the strict scalar types below, with
:data:`STRICT` as their config; :func:`config_error` turns the first of pydantic's errors into
one :class:`~starling.node.params.ConfigError` line that starts with the dotted field path
(``hyperparameters.rho: expected a number, got 'five'``).

The rules are the node's (:func:`starling.node.params.parse_params`, which checks parameter
dataclasses by hand so that a node does not load pydantic): a string is never a number, a
number never a boolean, no number is infinite or NaN, and a whole float (protobuf's Struct
has no integers) counts as an int.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any

import pydantic
from pydantic import BeforeValidator, ConfigDict, Strict, ValidationError

from starling.node.params import ConfigError, number_hint
from starling.node.shown import shown

__all__ = ["STRICT", "Bool", "Float", "Int", "Str", "config_error"]


def _no_text_or_flag(value: Any) -> Any:
    # Lax int would read "3" and True as 3 and 1; a user who wrote them meant something else.
    if isinstance(value, (str, bool, bytes)):
        raise ValueError("not an integer")
    return value


Int = Annotated[int, BeforeValidator(_no_text_or_flag)]
"""An integer; a whole float (from a protobuf Struct) counts, a string or boolean does not."""
Float = Annotated[float, Strict()]
"""A finite number (an int is fine); never a string or boolean."""
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]

STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
"""The model config of every schema: unknown keys and non-finite numbers are refused."""

# ---------------------------------------------------------------------------------------
# pydantic's errors as one line.

_WORDS = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_parsing_size": "expected an integer",  # a float beyond any integer's range (1e308)
    "int_from_float": "expected an integer",
    "value_error": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "dict_type": "expected a mapping",
    "mapping_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "dataclass_type": "expected a mapping",
    "missing": "required field is missing",
}


def _path(where: str, loc: tuple[Any, ...]) -> str:
    out = where
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = str(part)
        else:
            out += f".{part}"
    return out or "experiment"


def _container(schema: Any, loc: tuple[Any, ...]) -> Any:
    """The model that holds the field at ``loc``, following nested models, lists, unions."""
    current = schema
    for part in loc[:-1]:
        current = _step(current, part)
        if current is None:
            return None
    return current


def _step(annotation: Any, part: Any) -> Any:
    for candidate in _unwrap(annotation):
        if isinstance(part, int):
            if typing.get_origin(candidate) in (list, tuple) and typing.get_args(candidate):
                return typing.get_args(candidate)[0]
        elif isinstance(candidate, type) and issubclass(candidate, pydantic.BaseModel):
            field = candidate.model_fields.get(part)
            if field is not None:
                return field.annotation
    return None


def _unwrap(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _unwrap(arg)]
    return [annotation]


def _known(schema: Any, loc: tuple[Any, ...]) -> str:
    for holder in _unwrap(_container(schema, loc)):
        if isinstance(holder, type) and issubclass(holder, pydantic.BaseModel):
            names = sorted(f.alias or name for name, f in holder.model_fields.items())
            return f" (known: {', '.join(names) or 'none'})"
    return ""


def config_error(exc: ValidationError, where: str, schema: Any) -> ConfigError:
    """The first of pydantic's errors as a ConfigError naming the dotted field path.

    Locations that pydantic adds for union members or validators (``function-after[...]``,
    ``int``) are dropped, so the path is the one the user wrote.
    """
    error = exc.errors(include_url=False)[0]
    *inner, last = error["loc"] or ("",)
    loc = tuple(p for p in inner if isinstance(p, int) or _is_field_name(p))
    if error["type"] == "extra_forbidden" or isinstance(last, int) or _is_field_name(last):
        loc += (last,)  # an unknown key is named as written, even if not an identifier
    field = _path(where, loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return ConfigError(f"{field}: unknown field{_known(schema, loc)}")
    if kind == "missing":
        return ConfigError(f"{field}: required field is missing")
    if kind == "value_error" and isinstance(error.get("ctx", {}).get("error"), ConfigError):
        return ConfigError(f"{field}: {error['ctx']['error']}")
    if kind == "value_error":
        message = str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
        if message == "not an integer":
            return ConfigError(f"{field}: expected an integer, got {shown(value)}")
        return ConfigError(f"{field}: {message}")
    bounds = error.get("ctx", {})
    if kind == "greater_than_equal":
        return ConfigError(f"{field}: must be at least {bounds['ge']}, got {shown(value)}")
    if kind == "greater_than":
        return ConfigError(f"{field}: must be more than {bounds['gt']}, got {shown(value)}")
    if kind == "less_than_equal":
        return ConfigError(f"{field}: must be at most {bounds['le']}, got {shown(value)}")
    if kind == "too_short":
        return ConfigError(f"{field}: expected a non-empty list, got {shown(value)}")
    words = _WORDS.get(kind)
    if words is None:
        words = error["msg"][0].lower() + error["msg"][1:]
    hint = number_hint(value) if kind in ("float_type", "float_parsing") else ""
    return ConfigError(f"{field}: {words}, got {shown(value)}{hint}")


def _is_field_name(part: str) -> bool:
    return part.isidentifier() and part not in {"int", "float", "str", "bool", "none"}
