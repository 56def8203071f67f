"""Derive per-device health (CONTRACT ``falcon_gpu_health{check}``) from a snapshot.

Stateful because some checks are about change (a new XID, PCIe replays that keep
rising) rather than level. The rules follow NVIDIA's published guidance:
uncorrectable ECC, row-remap failure, 60+ retired pages, or an XID that means
the GPU needs a reset or replacement is a *fail*; a pending page retirement or
row remap (needs a GPU reset), thermal or hardware slowdown, or other XIDs are a
*warn*. NVLink CRC or replay errors rising are a *warn*, recovery errors rising a
*fail* (the ``nvlink`` check, on GPUs that report NVLink error counters). A GPU on an NVLink fabric
that is not registered with it or reports a degraded link or route fails the ``fabric`` check
(:mod:`falcon_gpu.health.fabric`). The state is bounded
by the number of devices ever seen.

``last_xid`` is the most recent XID as the watcher saw events arrive (what
dcgm-exporter's ``XID_ERRORS`` reports), not the most severe of an interval; a
snapshot without that order (``DeviceReading.last_xid`` unset) falls back to the
highest new code.
"""

from __future__ import annotations

from falcon_gpu.health.fabric import fabric_level
from falcon_gpu.model.cycle import FAIL, PASS, WARN, HealthReport
from falcon_gpu.model.snapshot import DeviceReading, NvlinkErrors, Snapshot

CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
"""XIDs that mean data corruption, a lost GPU or a reset/RMA: DBE (48), row remap
events (63, 64), NVLink (74), fallen off the bus (79), high SBE rate (92),
contained/uncontained ECC (94, 95), GSP errors (119, 120), unrecovered ECC (140)."""

RETIRED_PAGES_RMA = 60
XID_HOLD_SECONDS = 300.0
"""How long an XID keeps the ``xid`` check raised after it arrived."""


class _DeviceState:
    """What a device's change-based checks compare with, and its last report."""

    __slots__ = (
        "basis", "last_xid", "levels", "levels_key", "nvlink_errors", "pcie_replays", "report", "xid_at",
        "xid_counts",
    )  # fmt: skip

    def __init__(self) -> None:
        self.xid_counts: dict[int, int] = {}
        self.pcie_replays: int | None = None
        self.xid_at: dict[int, float] = {}
        """When an XID of each level (WARN, FAIL) last arrived: a critical XID keeps the check
        failed for its whole hold even if a harmless one follows it."""
        self.last_xid: int | None = None
        self.nvlink_errors: NvlinkErrors | None = None
        """The GPU's NVLink error totals last cycle."""
        self.report: HealthReport | None = None
        """The last report, handed out again while it would be equal (so the schema, which keeps
        the health series per GPU, finds it unchanged by identity)."""
        self.levels_key: tuple[object, ...] | None = None
        """The readings the GPU's level checks were last worked out from (:func:`_level_inputs`)."""
        self.levels: dict[str, int] | None = None
        """Those checks, while they hold for the same readings again: None after a cycle where a
        change-based check (PCIe replays, NVLink errors) fired, which the same readings do not repeat."""
        self.basis: tuple[bool, int, dict[str, int] | None] | None = None
        """(up, the ``xid`` check, the level checks) that :attr:`report`'s checks were made of."""


NVLINK_LEVELS: tuple[tuple[str, int], ...] = (("crc_flit", WARN), ("crc_data", WARN), ("replay", WARN),
                                              ("recovery", FAIL))  # fmt: skip
"""CRC and replay errors are retried by the link (warn: a cable or a connector degrading); a
recovery means the link went down and had to be retrained, its traffic stalled (fail)."""


def _nvlink_level(errors: NvlinkErrors, before: NvlinkErrors | None) -> int:
    """WARN/FAIL while the GPU's error totals rise; a total that went down (driver reload) is a reset.
    Totals that did not move (every cycle of a healthy GPU: the reader hands the same zero record
    again) pass without looking at the kinds."""
    if before is None or errors is before or errors == before:
        return PASS
    level = PASS
    for kind, severity in NVLINK_LEVELS:
        now, then = getattr(errors, kind), getattr(before, kind)
        if now is not None and then is not None and now > then:
            level = max(level, severity)
    return level


class HealthEvaluator:
    def __init__(self, *, xid_hold_seconds: float = XID_HOLD_SECONDS) -> None:
        self._state: dict[str, _DeviceState] = {}
        self._hold = xid_hold_seconds

    def evaluate(self, snapshot: Snapshot, *, monotonic: float | None = None) -> dict[str, HealthReport]:
        """``monotonic``: the monotonic clock at the snapshot, what the XID hold is measured on (a step
        of the wall clock must not end or stretch it); None: the snapshot's timestamp (a replay)."""
        now = snapshot.timestamp if monotonic is None else monotonic
        return {d.uuid: self._device(d, now) for d in snapshot.devices}

    def _device(self, dev: DeviceReading, now: float) -> HealthReport:
        st = self._state.get(dev.uuid)
        if st is None:
            st = self._state[dev.uuid] = _DeviceState()
        new_xids: dict[int, int] = {}
        if dev.xid_counts != st.xid_counts:  # the usual cycle has no new XID: nothing to compare
            new_xids = {
                xid: n - st.xid_counts.get(xid, 0)
                for xid, n in dev.xid_counts.items()
                if n > st.xid_counts.get(xid, 0)
            }
            st.xid_counts = dict(dev.xid_counts)
        if new_xids:
            st.xid_at[FAIL if CRITICAL_XIDS & new_xids.keys() else WARN] = now
            st.last_xid = dev.last_xid if dev.last_xid in new_xids else max(new_xids)
        xid = self._xid_level(st, now) if st.xid_at else PASS
        levels = self._levels_of(dev, st) if dev.up else None
        last = st.report
        if last is not None and not new_xids and not last.xid_in_interval and last.last_xid == st.last_xid:
            basis = (dev.up, xid, levels)
            if basis == st.basis:  # the usual cycle: made of the same checks (the same dict, by identity)
                return last
        checks = {"lost": PASS if dev.up else FAIL, "xid": xid}
        if levels is not None:
            checks.update(levels)
        st.basis = (dev.up, xid, levels)
        if (
            last is not None
            and not new_xids
            and not last.xid_in_interval
            and last.last_xid == st.last_xid
            and last.checks == checks
        ):
            return last
        report = st.report = HealthReport(checks=checks, xid_in_interval=new_xids, last_xid=st.last_xid)
        return report

    def _xid_level(self, st: _DeviceState, now: float) -> int:
        held = [level for level, at in st.xid_at.items() if now - at <= self._hold]
        return max(held, default=PASS)

    def _levels_of(self, dev: DeviceReading, st: _DeviceState) -> dict[str, int]:
        """The level-based and change-based checks of a GPU that answered: last cycle's dict itself
        while its readings are the same objects or equal (on a healthy GPU the readers hand the same
        records again) and no change-based check fired last cycle (the same readings: no change)."""
        key = _level_inputs(dev)
        if st.levels is not None and key == st.levels_key:
            st.levels_key = key  # an equal record that is a new object: compared by identity next time
            return st.levels
        checks: dict[str, int] = {}
        self._levels(dev, st, checks)
        st.levels_key = key
        st.levels = (
            checks if checks.get("pcie", PASS) == PASS and checks.get("nvlink", PASS) == PASS else None
        )
        return checks

    @staticmethod
    def _levels(dev: DeviceReading, st: _DeviceState, checks: dict[str, int]) -> None:
        """Add the level-based checks and the change-based ones of a GPU that answered to ``checks``."""
        if dev.ecc is not None:
            checks["ecc"] = FAIL if (dev.ecc.uncorrected_volatile or 0) > 0 else PASS
        if dev.retired_pages is not None:
            rp = dev.retired_pages
            if rp.single_bit + rp.double_bit >= RETIRED_PAGES_RMA:
                checks["retired_pages"] = FAIL
            elif rp.pending:
                checks["retired_pages"] = WARN
            else:
                checks["retired_pages"] = PASS
        if dev.remapped_rows is not None:
            rr = dev.remapped_rows
            checks["remapped_rows"] = FAIL if rr.failed else WARN if rr.pending else PASS
        if dev.pcie_replays is not None:
            rising = st.pcie_replays is not None and dev.pcie_replays > st.pcie_replays
            st.pcie_replays = dev.pcie_replays
            checks["pcie"] = WARN if rising else PASS
        reasons = dev.clock_event_reasons
        if reasons is not None:
            checks["thermal"] = FAIL if "hw_thermal" in reasons else WARN if "sw_thermal" in reasons else PASS
            checks["power"] = (
                FAIL if "hw_power_brake" in reasons else WARN if "hw_slowdown" in reasons else PASS
            )
        if dev.inforom_valid is not None:
            checks["inforom"] = PASS if dev.inforom_valid else WARN
        if dev.fabric is not None:
            checks["fabric"] = fabric_level(dev.fabric)
        if dev.nvlink_errors is not None:
            checks["nvlink"] = _nvlink_level(dev.nvlink_errors, st.nvlink_errors)
            st.nvlink_errors = dev.nvlink_errors


def _level_inputs(dev: DeviceReading) -> tuple[object, ...]:
    """Every reading :meth:`HealthEvaluator._levels` looks at (compared by identity first, then equality)."""
    return (
        dev.ecc, dev.retired_pages, dev.remapped_rows, dev.pcie_replays, dev.clock_event_reasons,
        dev.inforom_valid, dev.nvlink_errors, dev.fabric,
    )  # fmt: skip
