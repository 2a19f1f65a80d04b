"""The node's parameter checker (node/params.py): one ConfigError line naming the field.

It replaced pydantic in the node (issue 15: node RSS); these pin the rules it kept (a
string is never a number, a number never a boolean, nothing non-finite, a whole float is an
int) and the messages, for made-up classes covering every supported type and for the real
parameter classes of every sampler and model.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from starling.node.models import MODELS
from starling.node.params import ConfigError, parse_params
from starling.node.samplers import ALGORITHMS


@dataclasses.dataclass(frozen=True)
class Knobs:
    rate: float
    steps: int = 3
    verbose: bool = False
    label: str = "x"
    weights: tuple[float, ...] | None = None
    span: tuple[float, float] = (0.0, 1.0)
    grid: tuple[tuple[float, ...], ...] | None = None

    def validate(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate: must be positive, got {self.rate!r}")


def _error(values: object) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_params(Knobs, values, "hyperparameters")  # type: ignore[arg-type]
    return str(caught.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rate": "5"}, "hyperparameters.rate: expected a number, got '5'"),
        ({"rate": True}, "hyperparameters.rate: expected a number, got True"),
        ({"rate": None}, "hyperparameters.rate: expected a number, got None"),
        ({"rate": [1.0]}, "hyperparameters.rate: expected a number, got [1.0]"),
        ({"rate": b"1"}, "hyperparameters.rate: expected a number, got b'1'"),
        ({"rate": math.inf}, "hyperparameters.rate: expected a finite number, got inf"),
        ({"rate": math.nan}, "hyperparameters.rate: expected a finite number, got nan"),
        ({"rate": 10**400}, "hyperparameters.rate: expected a finite number, got 1000"),
        ({"rate": 1, "steps": 2.5}, "hyperparameters.steps: expected an integer, got 2.5"),
        ({"rate": 1, "steps": True}, "hyperparameters.steps: expected an integer, got True"),
        ({"rate": 1, "steps": "3"}, "hyperparameters.steps: expected an integer, got '3'"),
        ({"rate": 1, "steps": 1e30}, "hyperparameters.steps: expected an integer of at most 2^53"),
        # Integers travel to the nodes as doubles: simulate ran what run refused to send.
        (
            {"rate": 1, "steps": 2**53 + 1},
            "hyperparameters.steps: expected an integer of at most 2^53 = 9007199254740992 in "
            "size, got 9007199254740993",
        ),
        ({"rate": 1, "steps": -(2**70)}, "hyperparameters.steps: expected an integer of at most"),
        ({"rate": 1, "steps": -math.inf}, "hyperparameters.steps: expected a finite number"),
        ({"rate": 1, "verbose": 1}, "hyperparameters.verbose: expected true or false, got 1"),
        ({"rate": 1, "verbose": "yes"}, "hyperparameters.verbose: expected true or false"),
        ({"rate": 1, "label": 3}, "hyperparameters.label: expected a string, got 3"),
        ({"rate": 1, "weights": "ab"}, "hyperparameters.weights: expected a list, got 'ab'"),
        ({"rate": 1, "weights": 3}, "hyperparameters.weights: expected a list, got 3"),
        ({"rate": 1, "weights": {"a": 1}}, "hyperparameters.weights: expected a list"),
        ({"rate": 1, "weights": {1, 2}}, "hyperparameters.weights: expected a list"),
        ({"rate": 1, "weights": [1, "a"]}, "hyperparameters.weights[1]: expected a number"),
        ({"rate": 1, "weights": [True]}, "hyperparameters.weights[0]: expected a number"),
        ({"rate": 1, "span": [1]}, "hyperparameters.span: expected a list of 2 items, got [1]"),
        ({"rate": 1, "span": [1, 2, 3]}, "hyperparameters.span: expected a list of 2 items"),
        ({"rate": 1, "span": [0, math.nan]}, "hyperparameters.span[1]: expected a finite"),
        ({"rate": 1, "grid": [[1], [2, "x"]]}, "hyperparameters.grid[1][1]: expected a number"),
        ({"rate": 1, "grid": [1]}, "hyperparameters.grid[0]: expected a list, got 1"),
    ],
)
def test_a_wrong_type_names_the_field_and_the_value(values, message):
    assert _error(values).startswith(message)
    assert "\n" not in _error(values)


def test_the_largest_integer_a_double_holds_is_taken():
    assert parse_params(Knobs, {"rate": 1, "steps": 2**53}, "h").steps == 2**53
    assert parse_params(Knobs, {"rate": 1, "steps": -(2**53)}, "h").steps == -(2**53)


def test_a_missing_field_and_an_unknown_one_are_named():
    assert _error({}) == "hyperparameters.rate: required field is missing"
    assert _error({"rate": 1, "rat": 2}) == (
        "hyperparameters.rat: unknown field "
        "(known: grid, label, rate, span, steps, verbose, weights)"
    )


def test_fields_are_checked_in_declared_order_before_unknown_keys():
    # The first declared field that is wrong is the one reported, whatever the input order.
    assert _error({"bogus": 1, "steps": "x", "rate": "y"}).startswith("hyperparameters.rate:")
    assert _error({"bogus": 1, "rate": 1, "steps": "x"}).startswith("hyperparameters.steps:")
    assert _error({"bogus": 1}) == "hyperparameters.rate: required field is missing"


def test_an_out_of_range_value_is_named_by_the_class_s_own_check():
    assert _error({"rate": -1}) == "hyperparameters.rate: must be positive, got -1.0"
    with pytest.raises(ConfigError, match=r"^hyperparameters\.rho: must be positive$"):
        parse_params(ALGORITHMS["d-admms"].params, {"rho": 0}, "hyperparameters")


def test_not_a_mapping_and_keys_that_are_not_names_are_refused():
    assert _error([1, 2]) == "hyperparameters: expected a mapping, got [1, 2]"
    assert _error({"rate": 1, 3: 4}) == "hyperparameters: field names must be strings, got 3"


def test_values_are_converted_to_the_declared_types():
    knobs = parse_params(
        Knobs, {"rate": 5, "steps": 4.0, "weights": [1, 2.5], "grid": [[1], []]}, "h"
    )
    assert knobs == Knobs(rate=5.0, steps=4, weights=(1.0, 2.5), grid=((1.0,), ()))
    assert type(knobs.rate) is float and type(knobs.steps) is int
    assert type(knobs.weights[0]) is float  # type: ignore[index]
    # Left out: the class's defaults. None: an optional field's "nothing".
    assert parse_params(Knobs, {"rate": 1.0, "weights": None}, "h") == Knobs(rate=1.0)
    # numpy scalars and arrays (a sweep written in Python) count as what they hold.
    knobs = parse_params(
        Knobs, {"rate": np.float32(0.5), "steps": np.int64(7), "span": np.array([0, 2])}, "h"
    )
    assert (knobs.rate, knobs.steps, knobs.span) == (0.5, 7, (0.0, 2.0))
    assert type(knobs.steps) is int and type(knobs.rate) is float


def test_a_type_the_checker_cannot_check_is_refused_on_first_use():
    @dataclasses.dataclass(frozen=True)
    class Odd:
        table: dict[str, float] = dataclasses.field(default_factory=dict)

    with pytest.raises(TypeError, match=re.escape("Odd.table: parse_params cannot check")):
        parse_params(Odd, {}, "h")


def _classes():
    for name, info in ALGORITHMS.items():
        yield f"algorithm {name}", info.params
    for name in MODELS:
        yield f"model {name}", MODELS[name]


@pytest.mark.parametrize(("what", "cls"), list(_classes()), ids=lambda x: str(x))
def test_every_real_parameter_class_is_checked_field_by_field(what, cls):
    """Each sampler's and model's class: its defaults parse back to themselves, and each
    field refuses a value of the wrong kind with its name."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = {
        f.name: 1
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    base = parse_params(cls, required, "p")
    for f in fields:
        if f.name in required:
            continue
        value = getattr(base, f.name)
        assert getattr(parse_params(cls, {**required, f.name: value}, "p"), f.name) == value
        wrong = 1 if isinstance(value, (str, bool)) else "text"
        with pytest.raises(ConfigError, match=rf"^p\.{f.name}(\[\d+\])*: expected "):
            parse_params(cls, {**required, f.name: wrong}, "p")
