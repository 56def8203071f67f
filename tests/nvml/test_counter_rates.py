"""CounterRates.pair: each counter of a pair keeps its own rules (first value, reset, no value)."""

from __future__ import annotations

import pytest

from falcon_gpu.sources.nvml.rates import CounterRates


def test_each_counter_of_a_pair_has_its_own_first_value_reset_and_gap() -> None:
    rates = CounterRates()
    assert rates.pair("gpu0", "pcie", 1000, 5000, 10.0) == (None, None)  # first values: no rate
    assert rates.pair("gpu0", "pcie", 3000, 9000, 12.0) == (pytest.approx(1000.0), pytest.approx(2000.0))
    # the sent counter went down (a reset): no rate for it, the received one goes on
    assert rates.pair("gpu0", "pcie", 500, 13000, 14.0) == (None, pytest.approx(2000.0))
    # counting starts again from the new value
    assert rates.pair("gpu0", "pcie", 1500, 13000, 16.0) == (pytest.approx(500.0), 0.0)
    # no value now: no rate, and none the cycle after (nothing to count from)
    assert rates.pair("gpu0", "pcie", None, 15000, 18.0) == (None, pytest.approx(1000.0))
    assert rates.pair("gpu0", "pcie", 2500, 15000, 20.0) == (None, 0.0)
    assert rates.pair("gpu0", "pcie", 4500, 15000, 22.0) == (pytest.approx(1000.0), 0.0)
    # the clock did not move on: no rate for either
    assert rates.pair("gpu0", "pcie", 9000, 99000, 22.0) == (None, None)


def test_pairs_are_kept_per_device_and_name_and_forgotten_per_device() -> None:
    rates = CounterRates()
    rates.pair("gpu0", "pcie", 0, 0, 1.0)
    rates.pair("gpu0", "nvlink", 0, 0, 1.0)
    rates.pair("gpu1", "pcie", 0, 0, 1.0)
    rates.forget("gpu0")  # a lost GPU: its counters may restart from 0
    assert rates.pair("gpu0", "pcie", 10, 10, 2.0) == (None, None)
    assert rates.pair("gpu0", "nvlink", 10, 10, 2.0) == (None, None)
    assert rates.pair("gpu1", "pcie", 10, 20, 2.0) == (10.0, 20.0)
