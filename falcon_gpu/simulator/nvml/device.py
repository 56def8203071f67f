"""Simulated per-device NVML readings: identity, memory, utilisation, power, clocks, health.

Each method has the name and signature of the pynvml function it replaces and
answers in NVML's units (mW, mJ, MHz, percent), converting from the scenario's
base units, so the source's unit conversions are exercised for real. The scalar
readings' answers (which function or field ID, which scenario key, which unit) come
from the reading table (:mod:`falcon_gpu.readings.device`): :data:`SERVED_CALLS`,
:data:`SERVED_STRUCTS` and the table's entries of :data:`FIELD_VALUES`.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Hashable
from typing import Any

import msgspec
import pynvml

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.readings.device import READINGS
from falcon_gpu.readings.spec import SINT, Reading
from falcon_gpu.readings.units import Convert
from falcon_gpu.simulator.nvml import violations
from falcon_gpu.simulator.nvml.core import NvmlStruct, SimCore, SimDevice, SimMigDevice, fail
from falcon_gpu.simulator.scenario.parse import at


class Served(msgspec.Struct, frozen=True):  # collected: holds a conversion function
    """What the simulator needs to answer one table reading: where the scenario holds it, and how."""

    key: str
    group: str | None
    support: str
    """The ``not_supported`` name that switches it off."""
    encode: Convert
    """The scenario's unit -> NVML's."""

    @classmethod
    def of(cls, reading: Reading) -> Served:
        assert reading.sim is not None
        sim = reading.sim
        return cls(sim.key, sim.group, sim.support_name, reading.sim_to_nvml)


class DeviceCalls(SimCore):
    # -- system ----------------------------------------------------------
    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.scenario.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        major, _, minor = self.scenario.cuda_version.partition(".")
        try:
            return int(major) * 1000 + int(minor or 0) * 10
        except ValueError:
            fail(pynvml.NVML_ERROR_UNKNOWN)

    def nvmlDeviceGetCount(self) -> int:
        """Advances the simulated cycle (cycle 0 on the first call)."""
        self._enter("nvmlDeviceGetCount")
        self._advance()
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimDevice:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self._devices):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._devices[index]

    # -- identity --------------------------------------------------------
    def nvmlDeviceGetName(self, handle: Any) -> str:
        dev, mig = self._any(handle, "nvmlDeviceGetName", identity=True)
        return f"{dev.gpu.name} MIG {mig.mig.profile}" if mig else dev.gpu.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        dev, mig = self._any(handle, "nvmlDeviceGetUUID", identity=True)
        return mig.mig.uuid if mig else dev.gpu.uuid

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """The ``/dev/nvidia<N>`` minor: the index, as on most nodes."""
        return self._device(handle, "nvmlDeviceGetMinorNumber", identity=True).index

    def nvmlDeviceGetPciInfo(self, handle: Any) -> NvmlStruct:
        dev = self._device(handle, "nvmlDeviceGetPciInfo", identity=True)
        return NvmlStruct(busId=dev.gpu.pci_bus_id, busIdLegacy=dev.gpu.pci_bus_id[4:])

    # -- memory and utilisation -------------------------------------------
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> NvmlStruct:
        dev, mig = self._any(handle, "nvmlDeviceGetMemoryInfo")
        key = ("memory", version) if mig is None else ("memory", version, mig.mig.uuid)
        return self._memo(dev, key, self._memory, dev, mig, version)

    def _memory(self, dev: SimDevice, mig: SimMigDevice | None, version: int | None) -> NvmlStruct:
        if mig is not None:
            if mig.mig.memory_total_bytes is None or mig.mig.memory_used_bytes is None:
                fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
            total = round(at(mig.mig.memory_total_bytes, self._now))
            used = round(at(mig.mig.memory_used_bytes, self._now))
            reserved = 0
        else:
            total = self._int(dev, "memory_total_bytes")
            used = self._int(dev, "memory_used_bytes")
            if version:
                reserved = self._int(dev, "memory_reserved_bytes")
            else:  # v1 has no reserved field: NVML counts the reserved memory as used
                has_reserved = "memory_reserved_bytes" in dev.gpu.values and dev.gpu.supports(
                    "memory_reserved_bytes"
                )
                reserved = self._int(dev, "memory_reserved_bytes") if has_reserved else 0
        if not version:
            used += reserved
            return NvmlStruct(total=total, free=max(total - used, 0), used=used)
        if version != pynvml.nvmlMemory_v2:
            fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return NvmlStruct(
            version=version, total=total, reserved=reserved, free=max(total - used - reserved, 0), used=used
        )

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> NvmlStruct:
        dev = self._device(handle, "nvmlDeviceGetUtilizationRates")
        return self._memo(dev, "utilization", self._utilization, dev)

    def _utilization(self, dev: SimDevice) -> NvmlStruct:
        if self.mig_on(dev):  # NVML: "utilization is not supported on MIG-enabled GPUs"
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        members = SERVED_STRUCTS["nvmlDeviceGetUtilizationRates"]
        return NvmlStruct(**{member: self._answer(dev, served) for member, served in members})

    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        # [utilisation percent, sampling period µs]
        return [self._scalar(handle, "nvmlDeviceGetEncoderUtilization"), 167_000]

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        return [self._scalar(handle, "nvmlDeviceGetDecoderUtilization"), 167_000]

    # -- the table's plain answers -------------------------------------------
    def _answer(self, dev: SimDevice, served: Served) -> int:
        """The scenario's value this cycle in NVML's unit; NOT_SUPPORTED when missing or listed so."""
        return self._memo(dev, served, self._encoded, dev, served)

    def _encoded(self, dev: SimDevice, served: Served) -> int:
        values = dev.gpu.values if served.group is None else getattr(dev.gpu, served.group)
        series = None if values is None else values.get(served.key)
        if series is None or not dev.gpu.supports(served.support):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(served.encode(at(series, self._now)))

    def _scalar(
        self, handle: Any, fn: str, *args: int, unknown: int = pynvml.NVML_ERROR_NOT_SUPPORTED
    ) -> int:
        """``fn(handle, *args)`` for a reading of the table; ``unknown``: the code for arguments
        that name no reading (a sensor, a clock type the simulator does not serve)."""
        dev = self._device(handle, fn)
        served = SERVED_CALLS.get((fn, args))
        if served is None:
            fail(unknown)
        return self._answer(dev, served)

    # -- thermal and power -------------------------------------------------
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return self._scalar(
            handle, "nvmlDeviceGetTemperature", sensor, unknown=pynvml.NVML_ERROR_INVALID_ARGUMENT
        )

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        """As pynvml's: a ctypes array of ``c_nvmlFieldValue_t``, one per requested ID (an int, or a
        ``(fieldId, scopeId)`` pair), each with its own ``nvmlReturn``; NOT_SUPPORTED per field for
        IDs the simulator does not serve or the scenario lacks.

        The array is packed from the structs' C layout (:data:`FIELD_VALUE_LAYOUT`) rather than field
        by field: pynvml's structs set every attribute through Python, and that would make the
        simulator, not the code under measurement, the cost of a field-values call. Each list of IDs
        is answered once per cycle and device (``SimCore._memo``), kept cut where the timestamps go;
        a call joins the pieces with the cycle's stamp."""
        dev = self._device(handle, "nvmlDeviceGetFieldValues")
        try:
            key: Hashable = ("fields", *fieldIds)
            hash(key)
        except TypeError:  # not a list of IDs and pairs: the uncached path raises what it did
            pieces = self._field_pieces(dev, fieldIds)
        else:
            pieces = self._memo(dev, key, self._field_pieces, dev, fieldIds)
        array = pynvml.c_nvmlFieldValue_t * (len(pieces) - 1)  # ctypes keeps one array type per length
        return array.from_buffer_copy(self._stamp_bytes.join(pieces))

    def _field_pieces(self, dev: SimDevice, fieldIds: list[Any]) -> list[bytes]:
        """The packed answer to ``fieldIds`` this cycle, cut where each field's timestamp goes (the
        cycle's stamp joins the pieces: ``len(fieldIds) + 1`` of them)."""
        pieces = [b""]
        for requested in fieldIds:
            field_id, scope_id = requested if isinstance(requested, tuple) else (requested, 0)
            serve = FIELD_VALUES.get(field_id)
            scoped = SCOPED_FIELD_VALUES.get(field_id)
            value_type, ret, raw = 0, pynvml.NVML_SUCCESS, 0
            try:
                if scoped is not None:
                    value_type, number = scoped(self, dev, scope_id)
                elif serve is None:
                    fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
                else:
                    value_type, number = serve(self, dev)
                raw = _ULL_OF[value_type](number)
            except pynvml.NVMLError as exc:
                ret = exc.value
            packed = FIELD_VALUE_LAYOUT.pack(field_id, scope_id, 0, 0, value_type, ret, raw)
            pieces[-1] += packed[:_STAMP_AT]
            pieces.append(packed[_STAMP_AT + 8 :])
        return pieces

    def _links(self, dev: SimDevice) -> dict[int, Any]:
        links: dict[int, Any] | None = self._link_index.get(dev.index)
        if links is None:
            links = self._link_index[dev.index] = {n.link: n for n in dev.gpu.nvlink}
        return links

    def _nvlink(
        self, dev: SimDevice, link: int, key: str, scale: float = 1.0, support: str = "nvlink"
    ) -> int:
        """A link's counter; a link the GPU lacks answers INVALID_ARGUMENT, as NVML does for its ID
        (``support``: the ``not_supported`` name that also switches this field off)."""
        if not dev.gpu.supports("nvlink") or not dev.gpu.supports(support):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        found = self._links(dev).get(link)
        if found is None:
            fail(
                pynvml.NVML_ERROR_NOT_SUPPORTED if not dev.gpu.nvlink else pynvml.NVML_ERROR_INVALID_ARGUMENT
            )
        series = getattr(found, key)
        if series is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(at(series, self._now) * scale)

    def _nvlink_sum(self, dev: SimDevice, key: str, scale: float = 1.0, support: str = "nvlink") -> int:
        """A counter summed over the GPU's links (the ``scopeId = UINT_MAX`` throughput fields and the
        ``..._ERROR_COUNT_TOTAL`` ones); NOT_SUPPORTED where no link counts it."""
        if not dev.gpu.supports("nvlink") or not dev.gpu.supports(support):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        counted = [getattr(n, key) for n in dev.gpu.nvlink if getattr(n, key) is not None]
        if not counted:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return sum(round(at(series, self._now) * scale) for series in counted)

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        """NVML_FEATURE_ENABLED (1) for a link that is up, DISABLED (0) for one that is down or not
        listed; NOT_SUPPORTED on a GPU without NVLink (no ``nvlink`` links, or it is not supported),
        INVALID_ARGUMENT past the last link (NVML_NVLINK_MAX_LINKS, 18), as NVML answers."""
        dev = self._device(handle, "nvmlDeviceGetNvLinkState")
        if not dev.gpu.supports("nvlink") or not dev.gpu.nvlink:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < NVLINK_MAX_LINKS:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        found = self._links(dev).get(link)
        return int(found is not None and (found.active is None or bool(at(found.active, self._now))))

    def _nvlink_scoped(self, dev: SimDevice, link: int, key: str) -> int:
        """A throughput field: the link named by ``scopeId``, or all of them for UINT_MAX."""
        if link == ALL_LINKS:
            return self._nvlink_sum(dev, key, 1 / 1024)
        return self._nvlink(dev, link, key, 1 / 1024)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._scalar(handle, "nvmlDeviceGetPowerUsage")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._scalar(handle, "nvmlDeviceGetEnforcedPowerLimit")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self._scalar(handle, "nvmlDeviceGetTotalEnergyConsumption")

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        return self._scalar(handle, "nvmlDeviceGetPerformanceState")

    def nvmlDeviceGetFanSpeed(self, handle: Any) -> int:
        return self._scalar(handle, "nvmlDeviceGetFanSpeed")

    # -- clocks ------------------------------------------------------------
    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        return self._scalar(handle, "nvmlDeviceGetClockInfo", type)

    def _reasons(self, handle: Any, fn: str) -> int:
        dev = self._device(handle, fn)
        return self._memo(dev, "reasons", self._reasons_mask, dev)

    @staticmethod
    def _reasons_mask(dev: SimDevice) -> int:
        names = dev.gpu.clock_event_reasons
        if names is None or not dev.gpu.supports("clock_event_reasons"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return sum(1 << CLOCK_EVENT_REASONS.index(n) for n in set(names))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._reasons(handle, "nvmlDeviceGetCurrentClocksEventReasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        return self._reasons(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")

    # -- health ------------------------------------------------------------
    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        return self._scalar(handle, "nvmlDeviceGetPcieReplayCounter")

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        return self._ecc(self._device(handle, "nvmlDeviceGetTotalEccErrors"), errorType, counterType)

    def _ecc(self, dev: SimDevice, errorType: int, counterType: int) -> int:
        return self._memo(dev, ("ecc", errorType, counterType), self._ecc_count, dev, errorType, counterType)

    def _ecc_count(self, dev: SimDevice, errorType: int, counterType: int) -> int:
        ecc = dev.gpu.ecc
        if ecc is None or not dev.gpu.supports("ecc"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        kind = "corrected" if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else "uncorrected"
        scope = "volatile" if counterType == pynvml.NVML_VOLATILE_ECC else "aggregate"
        series = getattr(ecc, f"{kind}_{scope}")
        if series is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(at(series, self._now))

    def _retired(self, dev: SimDevice) -> Any:
        pages = dev.gpu.retired_pages
        if pages is None or not dev.gpu.supports("retired_pages"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pages

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        dev = self._device(device, "nvmlDeviceGetRetiredPages")
        double = sourceFilter == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
        return [0x1000 * (i + 1) for i in range(self._retired_count(dev, double=double))]

    def _retired_count(self, dev: SimDevice, *, double: bool) -> int:
        return self._memo(dev, ("retired", double), self._retired_now, dev, double)

    def _retired_now(self, dev: SimDevice, double: bool) -> int:
        pages = self._retired(dev)
        return round(at(pages.double_bit if double else pages.single_bit, self._now))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        pages = self._retired(self._device(device, "nvmlDeviceGetRetiredPagesPendingStatus"))
        return int(pages.pending)

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        return self._remapped(self._device(device, "nvmlDeviceGetRemappedRows"))

    def _remapped(self, dev: SimDevice) -> tuple[int, int, int, int]:
        return self._memo(dev, "remapped", self._remapped_now, dev)

    def _remapped_now(self, dev: SimDevice) -> tuple[int, int, int, int]:
        rows = dev.gpu.remapped_rows
        if rows is None or not dev.gpu.supports("remapped_rows"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        c = self._now
        return (
            round(at(rows.correctable, c)),
            round(at(rows.uncorrectable, c)),
            int(rows.pending),
            int(rows.failed),
        )

    def nvmlDeviceValidateInforom(self, handle: Any) -> None:
        dev = self._device(handle, "nvmlDeviceValidateInforom")
        if not dev.gpu.supports("inforom"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not dev.gpu.inforom_valid:
            fail(pynvml.NVML_ERROR_CORRUPTED_INFOROM)


ALL_LINKS = 0xFFFFFFFF
"""``scopeId`` UINT_MAX: "the aggregate value summed up across all links" (nvml.h)."""
_UINT, _ULL = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
_C, _U = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_V, _A = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC
FieldServer = Callable[[DeviceCalls, SimDevice], tuple[int, int]]


def _row(i: int) -> FieldServer:
    return lambda sim, dev: (_UINT, sim._remapped(dev)[i])


SERVED_CALLS: dict[tuple[str, tuple[int, ...]], Served] = {
    (r.nvml.call, r.nvml.args): Served.of(r)
    for r in READINGS
    if r.nvml is not None
    and r.nvml.call is not None
    and r.sim is not None
    and not isinstance(r.nvml.member, str)
}
"""(function, arguments after the handle) -> the table reading it answers (a plain number, or the first
element of a list such as the encoder's [percent, period])."""
SERVED_STRUCTS: dict[str, tuple[tuple[str, Served], ...]] = {}
for _r in READINGS:
    if (
        _r.nvml is not None
        and _r.nvml.call is not None
        and _r.sim is not None
        and isinstance(_r.nvml.member, str)
    ):
        SERVED_STRUCTS[_r.nvml.call] = (
            *SERVED_STRUCTS.get(_r.nvml.call, ()),
            (_r.nvml.member, Served.of(_r)),
        )
"""Function -> (struct member, reading) of the table readings it answers as a struct (utilisation rates;
the memory info's v1/v2 rules are written out in ``nvmlDeviceGetMemoryInfo``)."""


def _served(value_type: int, served: Served) -> FieldServer:
    return lambda sim, dev: (value_type, sim._answer(dev, served))


FIELD_VALUES: dict[int, FieldServer] = {
    field_id: _served(r.nvml.value_type, Served.of(r))
    for r in READINGS
    if r.nvml is not None and r.sim is not None
    for field_id in r.nvml.field_ids
}
FIELD_VALUES |= {
    pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: lambda sim, dev: (_ULL, sim._ecc(dev, _C, _V)),
    pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: lambda sim, dev: (_ULL, sim._ecc(dev, _U, _V)),
    pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL: lambda sim, dev: (_ULL, sim._ecc(dev, _C, _A)),
    pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL: lambda sim, dev: (_ULL, sim._ecc(dev, _U, _A)),
    pynvml.NVML_FI_DEV_RETIRED_SBE: lambda sim, dev: (_ULL, sim._retired_count(dev, double=False)),
    pynvml.NVML_FI_DEV_RETIRED_DBE: lambda sim, dev: (_ULL, sim._retired_count(dev, double=True)),
    pynvml.NVML_FI_DEV_RETIRED_PENDING: lambda sim, dev: (_UINT, int(sim._retired(dev).pending)),
    pynvml.NVML_FI_DEV_REMAPPED_COR: _row(0),
    pynvml.NVML_FI_DEV_REMAPPED_UNC: _row(1),
    pynvml.NVML_FI_DEV_REMAPPED_PENDING: _row(2),
    pynvml.NVML_FI_DEV_REMAPPED_FAILURE: _row(3),
}
FIELD_VALUES |= dict.fromkeys(violations.FIELD_IDS, violations.serve)
_NVLINK_ERRORS = {"CRC_FLIT": "crc_flit_errors", "CRC_DATA": "crc_data_errors", "REPLAY": "replay_errors",
                  "RECOVERY": "recovery_errors"}  # fmt: skip


_OLD_COUNTS = "nvlink_error_counts"
"""The ``not_supported`` name of the ``..._ERROR_COUNT_TOTAL`` and ``_L0``-``_L11`` fields (NVIDIA's NVML
mock, and Hopper-era drivers, answer them NOT_SUPPORTED)."""


def _link_errors(link: int, key: str) -> FieldServer:
    return lambda sim, dev: (_ULL, sim._nvlink(dev, link, key, support=_OLD_COUNTS))


def _total_errors(key: str) -> FieldServer:
    return lambda sim, dev: (_ULL, sim._nvlink_sum(dev, key, support=_OLD_COUNTS))


def _dl_errors(key: str) -> ScopedServer:
    return lambda sim, dev, link: (_ULL, sim._nvlink(dev, link, key, support="nvlink_dl_errors"))


for _kind, _key in _NVLINK_ERRORS.items():
    FIELD_VALUES[getattr(pynvml, f"NVML_FI_DEV_NVLINK_{_kind}_ERROR_COUNT_TOTAL")] = _total_errors(_key)
    for _link in range(12):
        FIELD_VALUES[getattr(pynvml, f"NVML_FI_DEV_NVLINK_{_kind}_ERROR_COUNT_L{_link}")] = _link_errors(
            _link, _key
        )
"""The field IDs the simulator serves, each from the same scenario value as its dedicated call."""

ScopedServer = Callable[[DeviceCalls, SimDevice, int], tuple[int, int]]
SCOPED_FIELD_VALUES: dict[int, ScopedServer] = {
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: lambda sim, dev, link: (
        _ULL,
        sim._nvlink_scoped(dev, link, "tx_bytes"),
    ),
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: lambda sim, dev, link: (
        _ULL,
        sim._nvlink_scoped(dev, link, "rx_bytes"),
    ),
}
SCOPED_FIELD_VALUES |= {
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC: _dl_errors("crc_flit_errors"),
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY: _dl_errors("replay_errors"),
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY: _dl_errors("recovery_errors"),
}
"""Field IDs whose ``scopeId`` names the NVLink, or is UINT_MAX for all links (throughput in KiB, as
NVML counts it); the data-link error counters of one link (the link's ``crc_flit_errors``,
``replay_errors``, ``recovery_errors``), as drivers since Hopper and NVIDIA's NVML mock serve them."""
NVLINK_MAX_LINKS = 18
"""NVML_NVLINK_MAX_LINKS on Hopper and later: the links ``nvmlDeviceGetNvLinkState`` takes."""

FIELD_VALUE_LAYOUT = struct.Struct("@IIqqIIQ")
"""``c_nvmlFieldValue_t`` in C: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn, value
(the 8-byte ``c_nvmlValue_t`` union; checked against ctypes in the simulator tests)."""
_STAMP_AT = struct.calcsize("@II")
"""Where the timestamp starts in :data:`FIELD_VALUE_LAYOUT`."""
_ULL_OF: dict[int, Callable[[float], int]] = {
    _UINT: lambda n: int(n) & 0xFFFFFFFF,  # uiVal: the union's low 4 bytes (little-endian)
    SINT: lambda n: int(n) & 0xFFFFFFFF,  # siVal: the same 4 bytes, two's complement
    _ULL: lambda n: int(n),
    pynvml.NVML_VALUE_TYPE_DOUBLE: lambda n: int.from_bytes(struct.pack("@d", n), sys.byteorder),
}
"""Each served value type as the union's 8 bytes read as one unsigned integer."""
