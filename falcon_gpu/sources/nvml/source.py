"""The NVML source: one :class:`Snapshot` per cycle, whatever state NVML and the GPUs are in.

A cycle: make sure NVML is up (:class:`NvmlSession`, init with backoff), call
``nvmlDeviceGetCount()`` exactly once (the simulator counts cycles by it), then
for every index run the registered readers (:data:`READERS`) on the cached
handle. Each reader runs in isolation: an unexpected error in one, or an answer
that is not a :class:`~falcon_gpu.sources.nvml.readers.base.Fields` (a misspelt
key, a wrong type), marks only that reader failing (``errors_total{kind="nvml_field"}``,
logged once) and leaves only its fields None. Per reader and cycle the telemetry
gets whether it succeeded on every GPU and the seconds it took over all of them
(``falcon_gpu_agent_reader_success`` / ``_reader_seconds``). A device that answers GPU_IS_LOST (or another
device-fatal code, even half-way through its readers) is reported ``up=False``
with the identity of its last good cycle while the others keep being read
(``errors_total{kind="gpu"}``). :meth:`NvmlSource.collect` never raises.

In a one-shot command (``one_shot``: ``run --once``, ``plugin``, ``doctor``, ``top --once``, which
have no XID thread) the XID event set is drained before the readings and again after them, so that
an XID raised while the GPUs were read is counted in the one cycle the process has.

A field that answered NOT_SUPPORTED is not asked again (said once per GPU model:
:mod:`~falcon_gpu.sources.nvml.unsupported`), except after the device's
MIG mode changed (NVML refuses GPU utilisation and process samples only while MIG
is on; without this, turning MIG off would leave them missing until a restart).

The success path formats no strings: telemetry keys are built once per device,
"works again" messages only for what was failing.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sources.nvml.calls import ABSENT, DeviceGone, NvmlCaller, text
from falcon_gpu.sources.nvml.direct import device_calls
from falcon_gpu.sources.nvml.field_values import FieldValues
from falcon_gpu.sources.nvml.gpm import GpmSamples
from falcon_gpu.sources.nvml.library import NvmlLibrary
from falcon_gpu.sources.nvml.mig_profiles import MigProfiles
from falcon_gpu.sources.nvml.process_names import ProcessNames
from falcon_gpu.sources.nvml.rates import CounterRates
from falcon_gpu.sources.nvml.reader_state import ReaderState
from falcon_gpu.sources.nvml.readers import READERS, DeviceContext, Fields, Reader, check_fields
from falcon_gpu.sources.nvml.session import NvmlSession
from falcon_gpu.sources.nvml.slow import SlowReadings

if TYPE_CHECKING:
    from falcon_gpu.advice.profiles import MigProfile
    from falcon_gpu.sources.nvml.xid import XidWatcher

log = logging.getLogger("falcon_gpu.nvml")


class Identity(msgspec.Struct, frozen=True, gc=False):
    uuid: str
    name: str
    pci_bus_id: str
    minor_number: int | None = None


class _Device:
    """A GPU whose handle and identity are known: what each of its cycles needs, looked up once
    (until the devices are looked up again)."""

    __slots__ = ("ctx", "ident", "keys", "scope", "shape")

    def __init__(self, ident: Identity, scope: str, ctx: DeviceContext, keys: tuple[str, ...]) -> None:
        self.ident = ident
        self.scope = scope
        """The device's UUID (``gpu<index>`` where it has none): its readers' NOT_SUPPORTED scope."""
        self.ctx = ctx
        """Its reader context, kept across cycles and reset each one (cheaper than a new one)."""
        self.keys = keys
        """The telemetry key of each reader on this device."""
        self.shape: list[Any] | None = None
        """The shape (keys, then each value's exact type) of the last merged answer found right: the
        steady cycle compares its shape with this one (a list compare, no hash of 60-odd items) and looks
        it up in the source's known-right shapes only when it differs."""


class _ReaderStats:
    """One cycle's per-reader outcome over all GPUs: succeeded everywhere, and seconds in total."""

    __slots__ = ("names", "ok", "readers", "seconds")

    def __init__(self, names: tuple[str, ...], readers: tuple[Reader, ...]) -> None:
        self.names, self.readers = names, readers
        self.ok = [True] * len(self.names)
        self.seconds = [0.0] * len(self.names)

    def report(self, telemetry: Telemetry) -> None:
        telemetry.readers_done(dict(zip(self.names, zip(self.ok, self.seconds, strict=True), strict=True)))


SHAPES_KEPT: Final = 1024
"""At most this many merged-answer shapes kept as found right, per source (a reader whose values are None
or not varies a little)."""


class NvmlSource:
    def __init__(
        self,
        library: NvmlLibrary,
        telemetry: Telemetry,
        *,
        clock: Callable[[], float] = time.monotonic,
        xid: XidWatcher | None = None,
        one_shot: bool = False,
    ) -> None:
        """``one_shot``: for a command that runs one cycle and ends: no retry to announce, and the XID
        events are drained again after the readings (the process has no event thread)."""
        self._one_shot = one_shot
        self._nvml = NvmlCaller(library)
        self._telemetry = telemetry
        self._session = NvmlSession(self._nvml, telemetry, clock, retrying=not one_shot)
        self._xid = xid
        self._count: int | None = None
        self._handles: dict[int, Any] = {}
        self._identity: dict[int, Identity] = {}
        self._names = ProcessNames(self._nvml)
        self._last_seen: dict[str, int] = {}
        self._mig_mode: dict[str, bool] = {}
        self._field_values = FieldValues(self._nvml)
        self._slow = SlowReadings()
        self._gpm = GpmSamples(self._nvml)
        self._rates = CounterRates()
        self._state = ReaderState()
        """What the readers keep across cycles (``ctx.state``): this source's alone."""
        self._failing: set[str] = set()
        """Reader keys now failing: only these get a "works again" message."""
        self._down: dict[int, str] = {}
        """GPU index -> the telemetry key under which it was reported down."""
        self._devices: dict[int, _Device] = {}
        """GPU index -> what its cycle needs, once its handle and identity are known."""
        self._split: tuple[Any, tuple[str, ...], tuple[Reader, ...]] = (None, (), ())
        """The :data:`READERS` last seen and its names and functions (a test may replace READERS)."""
        self._shapes: set[tuple[Any, ...]] = set()
        """The shapes (keys, then the exact type of each value) of merged answers found right: a device
        answers the same shape cycle after cycle, so an unknown one is checked reader by reader
        (:meth:`_checked`) only once (at most :data:`SHAPES_KEPT`)."""
        self._answers: list[Fields | None] = [None] * len(READERS)
        """The device being read: each reader's answer (None: it raised or was found wrong)."""

    @property
    def caller(self) -> NvmlCaller:
        return self._nvml

    def mig_profiles(self, snapshot: Snapshot) -> dict[str, tuple[MigProfile, ...]]:
        """GPU model -> its MIG profiles (``falcon-gpu advise``; each GPU asked once, after a cycle)."""
        if not hasattr(self, "_mig_profiles"):
            self._mig_profiles = MigProfiles(self._nvml)
        return self._mig_profiles.by_model(snapshot.devices, self._handles.get)

    # -- the cycle ---------------------------------------------------------
    def collect(self, timestamp: float) -> Snapshot:
        """One cycle's readings. Never raises: NVML down -> ``Snapshot(nvml_ok=False)`` (and no
        reader outcome: the ``reader_*`` series are absent rather than last cycle's)."""
        try:
            snapshot = self._collect(timestamp)
        except Exception as exc:  # the last line of defence: a bug must not stop the agent
            log.debug("NVML collection failed", exc_info=True)
            message = f"NVML collection failed unexpectedly: {type(exc).__name__}: {exc}"
            self._telemetry.failing("nvml:collect", "nvml", message)
            snapshot = Snapshot(timestamp=timestamp, nvml_ok=False, nvml_error=message)
        if not snapshot.nvml_ok:
            self._telemetry.readers_done({})
        if self._nvml.unsupported.pending:
            models = self._models(snapshot)
            counts = Counter(d.name for d in snapshot.devices if d.up)  # a lost GPU was not asked
            self._nvml.unsupported.report(models.get, counts.__getitem__)
        return snapshot

    def _models(self, snapshot: Snapshot) -> dict[str, str]:
        """Each GPU's not-supported scope (its UUID, and ``gpu<index>``) -> its model; each MIG
        instance's (its UUID) -> its GPU's model's instances."""
        models: dict[str, str] = {}
        for index, ident in self._identity.items():
            if ident.name:
                models[f"gpu{index}"] = ident.name
                if ident.uuid:
                    models[ident.uuid] = ident.name
        for d in snapshot.devices:
            for instance in d.mig:
                models[instance.uuid] = f"{d.name} MIG instances"
        return models

    def _collect(self, timestamp: float) -> Snapshot:
        if not self._session.ensure():
            return Snapshot(timestamp=timestamp, nvml_ok=False, nvml_error=self._session.error)
        count, error = self._device_count()
        if count is None:
            return Snapshot(timestamp=timestamp, nvml_ok=False, nvml_error=error)
        xid_counts: dict[str, dict[int, int]] = {}
        last_xid: dict[str, int] = {}
        if self._xid is not None:
            self._xid.drain_now()
            xid_counts, last_xid = self._xid.read()
        if self._split[0] is not READERS:
            self._split = READERS, tuple(name for name, _ in READERS), tuple(reader for _, reader in READERS)
        stats = _ReaderStats(self._split[1], self._split[2])
        devices = tuple([self._read_device(i, timestamp, xid_counts, last_xid, stats) for i in range(count)])
        if self._one_shot and self._xid is not None and self._xid.drain_after_readings():
            devices = self._with_xids(devices, *self._xid.read())
        stats.report(self._telemetry)
        self._names.end_cycle()
        self._telemetry.recovered("nvml:collect", "NVML collection works again")
        return Snapshot(
            timestamp=timestamp,
            nvml_ok=True,
            driver_version=self._session.driver_version,
            cuda_version=self._session.cuda_version,
            devices=devices,
        )

    @staticmethod
    def _with_xids(
        devices: tuple[DeviceReading, ...], xid_counts: dict[str, dict[int, int]], last_xid: dict[str, int]
    ) -> tuple[DeviceReading, ...]:
        """The readings with the XIDs that a one-shot cycle's second drain took (raised while the
        GPUs were read): those of the GPUs whose counts changed are replaced."""
        out = []
        for d in devices:
            counts = xid_counts.get(d.uuid)
            if counts is not None and counts != d.xid_counts:
                d = msgspec.structs.replace(d, xid_counts=dict(counts), last_xid=last_xid.get(d.uuid))
            out.append(d)
        return tuple(out)

    def _device_count(self) -> tuple[int | None, str | None]:
        self._nvml.errors.clear()
        try:
            count = self._nvml.call("system", "device_count", "nvmlDeviceGetCount")
        except DeviceGone as gone:
            self._forget_devices()
            self._session.lost(gone.message)
            return None, self._session.error
        if count is ABSENT:
            error = self._nvml.errors[0] if self._nvml.errors else "nvmlDeviceGetCount is not available"
            self._telemetry.failing("nvml:count", "nvml", f"NVML cannot count the GPUs: {error}")
            return None, error
        self._telemetry.recovered("nvml:count", "NVML counts the GPUs again")
        if count != self._count:
            if self._count is not None:
                log.info("NVML: the GPU count changed from %s to %s; looking the devices up again",
                         self._count, count)  # fmt: skip
            self._forget_devices()
            self._count = int(count)
        return int(count), None

    def _forget_devices(self) -> None:
        self._handles.clear()
        self._identity.clear()
        self._devices.clear()
        self._slow.forget()
        self._state.forget_scopes()
        self._gpm.close()
        self._count = None

    # -- one device --------------------------------------------------------
    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._nvml.call(f"gpu{index}", "handle", "nvmlDeviceGetHandleByIndex", index)
            if handle is ABSENT:
                raise DeviceGone(None, "; ".join(self._nvml.errors) or "no handle for this index")
            self._handles[index] = handle
        return handle

    def _read_identity(self, index: int, handle: Any) -> Identity:
        scope = f"gpu{index}"
        uuid = self._nvml.call(scope, "uuid", "nvmlDeviceGetUUID", handle)
        name = self._nvml.call(scope, "name", "nvmlDeviceGetName", handle)
        pci = self._nvml.call(scope, "pci_info", "nvmlDeviceGetPciInfo", handle)
        if self._nvml.errors:
            raise DeviceGone(None, "; ".join(self._nvml.errors))
        # Optional (GKE device IDs only): a failure here must not mark the device down.
        minor = self._nvml.call(scope, "minor_number", "nvmlDeviceGetMinorNumber", handle)
        self._nvml.errors.clear()
        return Identity(
            uuid="" if uuid is ABSENT else text(uuid),
            name="" if name is ABSENT else text(name),
            pci_bus_id="" if pci is ABSENT else text(pci.busId),
            minor_number=None if minor is ABSENT else int(minor),
        )

    def _read_device(
        self,
        index: int,
        timestamp: float,
        xid_counts: dict[str, dict[int, int]],
        last_xid: dict[str, int],
        stats: _ReaderStats,
    ) -> DeviceReading:
        errors = self._nvml.errors
        if errors:
            errors.clear()
        device = self._devices.get(index)
        try:
            if device is None:
                device = self._prepare(index, timestamp)
            else:
                device.ctx.reset(timestamp, self._field_values.batch(device.scope, device.ctx.handle))
            fields = self._run_readers(index, device, stats)
        except DeviceGone as gone:
            return self._gone(index, gone, xid_counts, last_xid)
        ident = device.ident
        if self._down:
            down = self._down.pop(index, None)
            if down is not None:
                self._telemetry.recovered(down, f"GPU {index} ({ident.uuid}) answers again")
        counts = xid_counts.get(ident.uuid)
        return DeviceReading.of_readings(
            index, ident.uuid, ident.name, ident.pci_bus_id, ident.minor_number,
            None if counts is None else dict(counts), last_xid.get(ident.uuid), fields,
        )  # fmt: skip

    def _prepare(self, index: int, timestamp: float) -> _Device:
        """A device's first cycle (or its first since the devices were looked up again): its handle,
        identity, reader context and telemetry keys, kept for the cycles after it."""
        handle = self._handle(index)
        ident = self._identity.get(index)
        if ident is None:
            ident = self._identity[index] = self._read_identity(index, handle)
        scope = ident.uuid or f"gpu{index}"
        ctx = DeviceContext(
            nvml=self._nvml, handle=handle, scope=scope, index=index, timestamp=timestamp,
            names=self._names, last_seen_us=self._last_seen,
            field_values=self._field_values.batch(scope, handle), slow=self._slow, gpm=self._gpm,
            rates=self._rates, state=self._state, calls=device_calls(self._nvml),
        )  # fmt: skip
        keys = tuple(f"reader:{name}:{scope}" for name, _ in READERS)
        device = self._devices[index] = _Device(ident, scope, ctx, keys)
        return device

    def _gone(
        self, index: int, gone: DeviceGone, xid_counts: dict[str, dict[int, int]], last_xid: dict[str, int]
    ) -> DeviceReading:
        """A device that stopped answering: down, with the identity of its last good cycle."""
        known = self._identity.get(index) or Identity("", "", "")
        scope = known.uuid or f"gpu{index}"
        self._gpm.forget(scope)  # its samples, and its instances'
        self._rates.forget(scope)
        self._field_values.forget(scope)
        self._state.forget(scope)  # its readers' kept state, and its instances'
        key = self._down[index] = f"gpu:{known.uuid or index}"
        self._telemetry.failing(key, "gpu", f"GPU {index} ({known.uuid or 'uuid unknown'}) is down: {gone}")
        return DeviceReading(
            index=index, uuid=known.uuid, name=known.name, pci_bus_id=known.pci_bus_id, up=False,
            error=str(gone), xid_counts=dict(xid_counts.get(known.uuid, {})),
            minor_number=known.minor_number, last_xid=last_xid.get(known.uuid),
        )  # fmt: skip

    def _run_readers(self, index: int, device: _Device, stats: _ReaderStats) -> Fields:
        """Every reader on one device. The errors list is looked at once per reader and cleared only
        where a reader left something in it (:meth:`_errors_of`). The success path checks one shape, the
        merged answer's (see :attr:`_shapes`); an unknown one is checked reader by reader
        (:meth:`_checked`), which drops only the answer at fault. "Works again" is said after that
        check, never before."""
        ctx = device.ctx
        errors = self._nvml.errors  # empty here: _read_device cleared it, _read_identity too
        fields, seconds, answers = ctx.fields, stats.seconds, self._answers
        failed: list[int] | None = None
        clock = time.perf_counter
        started = clock()
        for i, reader in enumerate(stats.readers):
            try:
                answer = reader(ctx)
                fields |= answer  # dict.update, without the argument tuple a method call builds
            except DeviceGone:
                raise
            except Exception as exc:  # a reader must never take the device (or the agent) down
                answer = None
                log.debug("NVML reader %s failed", stats.names[i], exc_info=True)
                errors.append(f"{type(exc).__name__}: {exc}")
            answers[i] = answer
            now = clock()  # one clock read per reader: its end is the next one's start
            seconds[i] += now - started
            started = now
            if errors:
                failed = self._errors_of(stats, i, device, index, failed)
        shape = [*fields, *map(type, fields.values())]
        if shape != device.shape:  # not last cycle's: look it up among the known-right ones
            if tuple(shape) in self._shapes:
                device.shape = shape
            else:
                fields = ctx.fields = self._checked(shape, stats, device, index, failed is None)
        if self._failing:
            self._recovered(stats, device, index, failed or ())
        enabled = fields.get("mig_enabled")
        if enabled is not None and self._mig_mode.get(device.scope) != enabled:
            self._note_mig_mode(index, device.scope, enabled)
        return fields

    def _errors_of(
        self, stats: _ReaderStats, i: int, device: _Device, index: int, failed: list[int] | None
    ) -> list[int]:
        """Reader ``i`` left errors: it failed on this device (the errors are cleared for the next)."""
        errors = self._nvml.errors
        self._reader_failed(stats, i, device, index, "; ".join(errors))
        errors.clear()
        if failed is None:
            failed = []
        failed.append(i)
        return failed

    def _checked(
        self, shape: list[Any], stats: _ReaderStats, device: _Device, index: int, clean: bool
    ) -> Fields:
        """The merged answer rebuilt from the answers :func:`check_fields` finds right; a wrong one marks
        its reader failing. A clean merged answer's ``shape`` (worked out by the caller) is remembered
        (under the same cap)."""
        fields: Fields = {}
        answers = self._answers
        for i, name in enumerate(stats.names):
            answer = answers[i]
            if answer is None:
                continue
            try:
                check_fields(name, answer)
            except TypeError as exc:
                self._reader_failed(stats, i, device, index, f"TypeError: {exc}")
                answers[i] = None
                clean = False
                continue
            fields.update(answer)
        if clean:
            device.shape = shape
            if len(self._shapes) < SHAPES_KEPT:
                self._shapes.add(tuple(device.shape))
        return fields

    def _recovered(self, stats: _ReaderStats, device: _Device, index: int, failed: Any) -> None:
        """Say "works again" for this device's readers that were failing and answered right now."""
        for i, key in enumerate(device.keys):
            if key in self._failing and i not in failed and self._answers[i] is not None:
                self._failing.discard(key)
                message = f"GPU {index} ({device.scope}): reading {stats.names[i]} works again"
                self._telemetry.recovered(key, message)

    def _reader_failed(self, stats: _ReaderStats, i: int, device: _Device, index: int, problem: str) -> None:
        stats.ok[i] = False
        key = device.keys[i]
        self._failing.add(key)
        message = f"GPU {index} ({device.scope}): reading {stats.names[i]}: {problem}"
        self._telemetry.failing(key, "nvml_field", message)

    def _note_mig_mode(self, index: int, scope: str, enabled: bool) -> None:
        """The MIG mode answered differs from the one kept (or none was): keep it; a change asks the
        device's unsupported fields again."""
        before = self._mig_mode.get(scope)
        self._mig_mode[scope] = enabled
        if before is not None and before != enabled:
            log.info("NVML: MIG mode of GPU %d (%s) is now %s; asking its unsupported fields again",
                     index, scope, "on" if enabled else "off")  # fmt: skip
            self._nvml.forget_not_supported(scope)

    # -- doctor and shutdown -------------------------------------------------
    def close(self) -> None:
        """Shut NVML down (the XID watcher, if any, is stopped by its owner)."""
        self._gpm.close()
        self._session.close()
        self._forget_devices()
