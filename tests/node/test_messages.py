"""``all_finite``: the one-pass finiteness check both ends of a link use."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.messages import all_finite


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_finite_arrays_pass_even_when_their_sum_overflows(dtype):
    big = np.finfo(dtype).max
    assert all_finite(np.array([[big, big], [big, -1.0]], dtype=dtype))  # the sum is inf
    assert all_finite(np.full((300, 300), big, dtype=dtype))  # large: decided by the sum
    assert all_finite(np.zeros((0, 3), dtype=dtype))
    assert all_finite(np.arange(6, dtype=dtype).reshape(2, 3))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_non_finite_element_fails(bad, dtype):
    value = np.ones((500, 40), dtype=dtype)
    value[17, 3] = bad
    assert not all_finite(value)
    assert not all_finite(value[15:20])  # small: element-wise
    value[17, 3] = 1.0
    value[0, 0], value[0, 1] = np.inf, -np.inf  # a sum of nan
    assert not all_finite(value)


def test_integers_are_finite_and_complex_is_checked():
    assert all_finite(np.array([2**62, 2**62], dtype=np.int64))
    assert not all_finite(np.array([1 + 1j, complex(np.nan, 0)]))
    assert all_finite(np.array([1 + 1j, 2 - 1j]))
