"""The risk reasons of a GPU from what the agent holds: its readings over time.

The same reasons, weights and full levels as the recording rules (:mod:`falcon_gpu.risk.table`),
computed the same way: a counter's increase over the reason's window (a drop is a reset: the
new value counts, as PromQL's ``increase``), a level read now, a share of the last hour. What
differs is only the history at hand: ``doctor`` holds the cycles it read itself, so a trend it
has not watched for long reads low where the store, with its hour or day, sees it whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from falcon_gpu.risk.table import HOUR, PRECURSOR_XIDS, REASONS, THROTTLE_REASONS

_PRECURSORS = frozenset(PRECURSOR_XIDS)
_THROTTLES = frozenset(THROTTLE_REASONS)


@dataclass(frozen=True)
class _Sample:
    """One cycle of one GPU: the counters and flags the reasons look at (None: not read)."""

    at: float
    ecc_corrected: int | None
    xids: int
    nvlink_errors: int | None
    pcie_replays: int | None
    throttled: bool


@dataclass(frozen=True)
class RiskReport:
    """A GPU's score and each reason's part of it (only the reasons that count, largest first)."""

    score: float
    reasons: tuple[tuple[str, float], ...]

    def text(self) -> str:
        parts = ", ".join(f"{name} {part:.2f}" for name, part in self.reasons)
        return f"risk {self.score:.2f}" + (f": {parts}" if parts else "")


def _sample(dev: DeviceReading, at: float) -> _Sample:
    nv = dev.nvlink_errors
    nvlink = None if nv is None else sum(v or 0 for v in (nv.crc_flit, nv.crc_data, nv.replay, nv.recovery))
    return _Sample(
        at=at,
        ecc_corrected=None if dev.ecc is None else dev.ecc.corrected_volatile,
        xids=sum(n for xid, n in (dev.xid_counts or {}).items() if xid in _PRECURSORS),
        nvlink_errors=nvlink,
        pcie_replays=dev.pcie_replays,
        throttled=bool(_THROTTLES & set(dev.clock_event_reasons or ())),
    )


def _increase(values: Iterable[int | None], *, from_zero: bool = False) -> float:
    """What a counter gained over the values, a drop read as a reset (the new value counts).
    ``from_zero``: the counter began at 0 where the values begin (the agent's own XID counts)."""
    total, last = 0, 0 if from_zero else None
    for v in values:
        if v is None:
            continue
        if last is not None:
            total += v - last if v >= last else v
        last = v
    return float(total)


class RiskHistory:
    """The last day of each GPU's samples, bounded: ``max_samples`` per GPU, ``max_gpus`` GPUs."""

    def __init__(self, *, max_samples: int = 4096, max_gpus: int = 256) -> None:
        self._samples: dict[str, deque[_Sample]] = {}
        self._latest: dict[str, DeviceReading] = {}
        self._max_samples = max_samples
        self._max_gpus = max_gpus

    def add(self, snapshot: Snapshot) -> None:
        for dev in snapshot.devices:
            if not dev.up:
                continue
            samples = self._samples.get(dev.uuid)
            if samples is None:
                if len(self._samples) >= self._max_gpus:
                    continue
                samples = self._samples[dev.uuid] = deque(maxlen=self._max_samples)
            samples.append(_sample(dev, snapshot.timestamp))
            self._latest[dev.uuid] = dev

    def report(self, uuid: str) -> RiskReport:
        """The GPU's score and reasons now; a GPU never seen answering scores 0."""
        samples = self._samples.get(uuid)
        if not samples:
            return RiskReport(0.0, ())
        now = samples[-1].at
        parts = []
        for reason in REASONS:
            window = [s for s in samples if now - s.at <= reason.window]
            value = _INPUTS[reason.name](self._latest[uuid], _Window(window, window[0] is samples[0]))
            part = reason.weight * min(value / reason.full, 1.0)
            if part > 0:
                parts.append((reason.name, part))
        parts.sort(key=lambda p: -p[1])
        return RiskReport(min(sum(p for _, p in parts), 1.0), tuple(parts))


@dataclass(frozen=True)
class _Window:
    """A GPU's samples within a reason's window; ``fresh``: they begin where the history does (the
    agent's XID counts, which start at 0 with it, then count whole, as the rules' ``or`` does)."""

    samples: list[_Sample]
    fresh: bool


def _throttled_share(window: list[_Sample]) -> float:
    """Seconds spent throttled over the hour: each interval counts when it ended throttled."""
    return sum(b.at - a.at for a, b in pairwise(window) if b.throttled) / HOUR


def _retired(d: DeviceReading) -> float:
    return float(d.retired_pages.single_bit + d.retired_pages.double_bit) if d.retired_pages else 0.0


_INPUTS: dict[str, Callable[[DeviceReading, _Window], float]] = {
    "row_remap_failure": lambda d, w: float(bool(d.remapped_rows and d.remapped_rows.failed)),
    "ecc_corrected_rate": lambda d, w: _increase(s.ecc_corrected for s in w.samples),
    "xid_recurring": lambda d, w: _increase((s.xids for s in w.samples), from_zero=w.fresh),
    "retired_pages": lambda d, w: _retired(d),
    "retired_pages_pending": lambda d, w: float(bool(d.retired_pages and d.retired_pages.pending)),
    "row_remap_pending": lambda d, w: float(bool(d.remapped_rows and d.remapped_rows.pending)),
    "nvlink_error_rate": lambda d, w: _increase(s.nvlink_errors for s in w.samples),
    "pcie_replay_rate": lambda d, w: _increase(s.pcie_replays for s in w.samples),
    "throttled": lambda d, w: _throttled_share(w.samples),
}
"""Each reason's input from the GPU's latest reading and its samples in the reason's window."""
