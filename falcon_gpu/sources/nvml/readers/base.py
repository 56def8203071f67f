"""What a reader gets (the device handle, the call helper, this cycle's state) and what it returns.

A reader is a plain function ``(ctx) -> Fields``: a :class:`Fields` typed dict
whose keys are :class:`~falcon_gpu.model.snapshot.DeviceReading` reading fields,
so mypy rejects a misspelt key or a wrong type. It makes its calls through
``ctx.nvml`` (value or ABSENT, never a pynvml exception), takes batched scalar
values from ``ctx.field_values`` and converts NVML units to base units. The
framework in :mod:`falcon_gpu.sources.nvml.source` runs each reader in isolation
and checks its answer at run time too (:func:`check_fields`): a reader that
raises or answers a key or type the snapshot does not have loses only its own
fields, never the device.
"""

import types
import typing
from collections.abc import Callable
from typing import Any, Final

import msgspec

from falcon_gpu.model.device_reading import ReadingFields
from falcon_gpu.model.fabric import FabricReading
from falcon_gpu.model.snapshot import (
    EccCounts,
    GpmReading,
    MigReading,
    NvlinkErrors,
    NvlinkReading,
    ProcessReading,
    RemappedRows,
    RetiredPages,
)
from falcon_gpu.readings.units import PERCENT, RATIO, converter
from falcon_gpu.sources.nvml.calls import NvmlCaller
from falcon_gpu.sources.nvml.direct import PynvmlCalls
from falcon_gpu.sources.nvml.field_values import FieldBatch
from falcon_gpu.sources.nvml.gpm import GpmSamples
from falcon_gpu.sources.nvml.process_names import ProcessNames
from falcon_gpu.sources.nvml.rates import CounterRates
from falcon_gpu.sources.nvml.reader_state import ReaderState
from falcon_gpu.sources.nvml.slow import SlowReadings


class Fields(ReadingFields, total=False):
    """What a reader answers: the reading fields of :class:`DeviceReading`. The scalar ones come from the
    reading table (:class:`~falcon_gpu.model.device_reading.ReadingFields`); the structured ones are
    listed here (identity, ``up`` and the XID counts are the source's)."""

    ecc: EccCounts | None
    retired_pages: RetiredPages | None
    remapped_rows: RemappedRows | None
    clock_event_reasons: frozenset[str] | None
    inforom_valid: bool | None
    fabric: FabricReading | None
    gpm: GpmReading | None
    nvlink_errors: NvlinkErrors | None
    nvlink: tuple[NvlinkReading, ...]
    mig_enabled: bool
    mig: tuple[MigReading, ...]
    processes: tuple[ProcessReading, ...]


def _runtime_types(hint: Any) -> tuple[type, ...]:
    """``int | None`` -> (int, NoneType); ``tuple[X, ...]`` -> (tuple,); a float also takes an int."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    out: list[type] = []
    for arg in args:
        origin = typing.get_origin(arg) or arg
        out.append(origin)
        if origin is float:
            out.append(int)
    return tuple(out)


FIELD_TYPES: Final[dict[str, tuple[type, ...]]] = {
    name: _runtime_types(hint) for name, hint in typing.get_type_hints(Fields).items()
}
"""What each field may hold at run time (derived from :class:`Fields`, checked in the guard)."""


def check_fields(reader: str, fields: Fields) -> None:
    """Raise TypeError when ``fields`` has a key :class:`Fields` lacks or a value of the wrong type.

    Keeps a reader's mistake (a misspelt key, a struct where a number belongs) inside
    that reader's guard instead of failing the device's ``DeviceReading`` for the whole device.
    The source checks a merged answer of a shape it has not seen right before only (its
    ``_shapes``)."""
    for key, value in fields.items():
        allowed = FIELD_TYPES.get(key)
        if allowed is None:
            raise TypeError(f"reader {reader} answered {key!r}, which is no DeviceReading field")
        if not isinstance(value, allowed):
            raise TypeError(f"reader {reader} answered {key}={type(value).__name__}")


class DeviceContext:
    """One device's cycle: what its readers share (built once per GPU and cycle, by the source)."""

    __slots__ = (
        "calls", "field_values", "fields", "gpm", "handle", "index", "last_seen_us", "names", "nvml", "rates",
        "samples", "scope", "slow", "sm_by_pid", "state", "timestamp",
    )  # fmt: skip

    def __init__(
        self,
        *,
        nvml: NvmlCaller,
        handle: Any,
        scope: str,
        index: int,
        timestamp: float,
        names: ProcessNames,
        last_seen_us: dict[str, int],
        field_values: FieldBatch,
        slow: SlowReadings,
        gpm: GpmSamples,
        rates: CounterRates,
        state: ReaderState,
        calls: PynvmlCalls | None = None,
    ) -> None:
        self.nvml = nvml
        self.calls = PynvmlCalls(nvml) if calls is None else calls
        """The device's process lists and samples: through buffers it keeps on the real bindings
        (:class:`~falcon_gpu.sources.nvml.direct.DirectCalls`), pynvml's calls on the simulator."""
        self.handle = handle
        self.scope = scope
        """The device's UUID: the key under which NOT_SUPPORTED answers are remembered."""
        self.index = index
        self.timestamp = timestamp
        self.names = names
        self.last_seen_us = last_seen_us
        """Per device scope: the newest process-utilisation sample time already consumed."""
        self.field_values = field_values
        """This device's batched ``nvmlDeviceGetFieldValues`` answers (one call per cycle)."""
        self.slow = slow
        """Answers not asked every cycle (:mod:`falcon_gpu.sources.nvml.slow`)."""
        self.gpm = gpm
        """Every GPU's and instance's previous GPM sample (kept across cycles by the source)."""
        self.rates = rates
        """The byte counters' previous values, for their per-second rates."""
        self.state = state
        """What the readers keep from one cycle to the next (the source's, per GPU scope)."""
        self.fields: Fields = {}
        """What earlier readers produced this cycle (the MIG reader uses the processes)."""
        self.sm_by_pid: dict[int, float] | None = {}
        """PID -> SM share this cycle; None where NVML gives no per-process utilisation."""
        self.samples: ProcessSamples | None = None
        """This cycle's process-utilisation samples, read once by the first reader that needs them
        (:func:`~falcon_gpu.sources.nvml.readers.processes.process_samples`)."""

    def reset(self, timestamp: float, field_values: FieldBatch) -> None:
        """Ready for the next cycle of the same device (what :meth:`__init__` sets per cycle)."""
        self.timestamp = timestamp
        self.field_values = field_values
        self.fields = {}
        self.sm_by_pid = {}
        self.samples = None


class ProcessSamples(msgspec.Struct, frozen=True, gc=False):
    """What one cycle's ``nvmlDeviceGetProcessUtilization`` samples say (one per GPU and cycle)."""

    sm_by_pid: dict[int, float] | None
    """PID -> mean SM share; None where NVML gives no per-process utilisation (MIG, some boards)."""
    encoder_in_use: bool
    """A sample showed the encoder busy (``encUtil`` > 0); True where there are no samples at all."""
    decoder_in_use: bool
    """The same for the decoder (``decUtil``)."""


Reader = Callable[[DeviceContext], Fields]


PERCENT_TO_RATIO: Final = converter(PERCENT, RATIO)


def ratio(percent: Any) -> float:
    """NVML percent -> ratio 0-1."""
    return PERCENT_TO_RATIO(float(percent))
