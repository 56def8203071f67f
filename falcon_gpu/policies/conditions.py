"""Each policy condition as a function of one GPU's readings: held, and the value that decided it.

Pure functions of the cycle's data, plus the one piece of history a rate needs
(the previous PCIe replay count). A reading the GPU does not give (``None``)
never holds: a GPU without a temperature sensor does not violate a temperature
policy. A lost GPU holds only ``health_fail`` on the ``lost`` check.
"""

from __future__ import annotations

from dataclasses import dataclass

from falcon_gpu.model.cycle import FAIL, HealthReport
from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.policies.config import PolicyConfig


@dataclass(frozen=True, slots=True)
class Verdict:
    holds: bool
    value: float | None = None
    """The reading that was compared (°C, W, count, replays per minute), for the alert's text."""
    detail: str = ""


@dataclass
class ReplayHistory:
    """The previous PCIe replay count of one GPU and when it was read."""

    count: int | None = None
    at: float | None = None
    per_minute: float | None = None

    def update(self, count: int | None, now: float) -> None:
        if count is None:
            self.count = self.at = self.per_minute = None
            return
        if self.count is not None and self.at is not None and now > self.at and count >= self.count:
            self.per_minute = (count - self.count) * 60.0 / (now - self.at)
        else:  # first reading, or the counter reset (driver reload): no rate yet
            self.per_minute = None
        self.count, self.at = count, now


def check(
    policy: PolicyConfig, dev: DeviceReading, health: HealthReport | None, replays: ReplayHistory
) -> Verdict:
    """Whether ``policy``'s condition holds on ``dev`` this cycle."""
    c = policy.condition
    if c == "health_fail":
        failed = [name for name in policy.health_fail or () if health and health.checks.get(name) == FAIL]
        return Verdict(bool(failed), float(len(failed)), ", ".join(failed))
    if not dev.up:
        return Verdict(False)
    if c == "temperature_above":
        return _above(dev.temperature_celsius, policy.temperature_above)
    if c == "power_above":
        return _above(dev.power_watts, policy.power_above)
    if c == "retired_pages_above":
        rp = dev.retired_pages
        return _above(None if rp is None else rp.single_bit + rp.double_bit, policy.retired_pages_above)
    if c == "pcie_replays_per_minute_above":
        return _above(replays.per_minute, policy.pcie_replays_per_minute_above)
    if c == "ecc_uncorrected":
        n = None if dev.ecc is None else dev.ecc.uncorrected_volatile
        return Verdict(bool(n), None if n is None else float(n))
    if c == "remapped_rows_failed":
        rr = dev.remapped_rows
        return Verdict(bool(rr and rr.failed), None if rr is None else float(rr.failed))
    if c == "xid":
        seen = sorted(x for x in (health.xid_in_interval if health else {}) if x in (policy.xid or ()))
        return Verdict(bool(seen), float(seen[-1]) if seen else None, ", ".join(map(str, seen)))
    raise AssertionError(f"unhandled policy condition {c!r}")  # PolicyConfig allows no other


def _above(value: float | None, limit: float | None) -> Verdict:
    if value is None or limit is None:
        return Verdict(False, value)
    return Verdict(value > limit, float(value))
