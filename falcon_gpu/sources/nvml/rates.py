"""Per-second rates of NVML's byte counters between consecutive cycles, resets included.

dcgm-exporter's ``DCGM_FI_PROF_PCIE_TX_BYTES`` and Open-Falcon's ``Tx``/``NvlinkTx`` are rates,
while NVML gives counters since the driver loaded. A counter that went down (a driver reload,
a GPU reset) has no meaningful rate for that interval: the rate is absent there, never
negative, and counting starts again from the new value. The ``_total`` series carry the raw
counter, which Prometheus' ``rate()`` treats as a reset the same way.
"""

from __future__ import annotations


class CounterRates:
    """The previous value and time of each counter, keyed by (device scope, counter name)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[float, float]] = {}

    def rate(self, scope: str, name: str, value: float | None, now: float) -> float | None:
        """``value``'s rate per second since the previous call; None: first value, reset, or no value."""
        key = (scope, name)
        if value is None:
            self._last.pop(key, None)
            return None
        last = self._last.get(key)
        self._last[key] = (value, now)
        if last is None or value < last[0] or now <= last[1]:
            return None
        return (value - last[0]) / (now - last[1])

    def forget(self, scope: str) -> None:
        """Drop a device's counters (it was lost: its counters may restart from 0)."""
        for key in [k for k in self._last if k[0] == scope]:
            del self._last[key]
