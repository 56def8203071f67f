"""Per-second rates of NVML's byte counters between consecutive cycles, resets included.

dcgm-exporter's ``DCGM_FI_PROF_PCIE_TX_BYTES`` and Open-Falcon's ``Tx``/``NvlinkTx`` are rates,
while NVML gives counters since the driver loaded. A counter that went down (a driver reload,
a GPU reset) has no meaningful rate for that interval: the rate is absent there, never
negative, and counting starts again from the new value. The ``_total`` series carry the raw
counter, which Prometheus' ``rate()`` treats as a reset the same way.
"""

from __future__ import annotations

Pair = tuple[float | None, float | None]


class CounterRates:
    """The previous values and time of each pair of counters read together (bytes sent and received),
    keyed by (device scope, pair name)."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, str], tuple[float | None, float | None, float]] = {}
        """Per (scope, pair name): the two counters' last values (None: no value then) and their time."""

    def pair(self, scope: str, name: str, sent: float | None, received: float | None, now: float) -> Pair:
        """The per-second rates of two counters read together (PCIe or NVLink bytes sent and received)
        since the previous call: None for a counter on the first call, after a reset (it went down) or
        without a value (now or then); one look-up for both (every cycle, on every GPU that has them)."""
        key = (scope, name)
        last = self._pairs.get(key)
        self._pairs[key] = (sent, received, now)
        if last is None or now <= last[2]:
            return None, None
        seconds = now - last[2]
        then_sent, then_received = last[0], last[1]
        tx = rx = None
        if sent is not None and then_sent is not None and sent >= then_sent:
            tx = (sent - then_sent) / seconds
        if received is not None and then_received is not None and received >= then_received:
            rx = (received - then_received) / seconds
        return tx, rx

    def forget(self, scope: str) -> None:
        """Drop a device's counters (it was lost: its counters may restart from 0)."""
        for key in [k for k in self._pairs if k[0] == scope]:
            del self._pairs[key]
