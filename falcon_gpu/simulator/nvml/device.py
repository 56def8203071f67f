"""Simulated per-device NVML readings: identity, memory, utilisation, power, clocks, health.

Each method has the name and signature of the pynvml function it replaces and
answers in NVML's units (mW, mJ, MHz, percent), converting from the scenario's
base units, so the source's unit conversions are exercised for real.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from typing import Any

import pynvml

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.simulator.nvml.core import NvmlStruct, SimCore, SimDevice, fail
from falcon_gpu.simulator.scenario.parse import at


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
        if mig is not None:
            if mig.mig.memory_total_bytes is None or mig.mig.memory_used_bytes is None:
                fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
            total = round(at(mig.mig.memory_total_bytes, self.cycle))
            used = round(at(mig.mig.memory_used_bytes, self.cycle))
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
        if dev.gpu.mig:  # NVML: "utilization is not supported on MIG-enabled GPUs"
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return NvmlStruct(
            gpu=self._int(dev, "utilization_gpu_percent"), memory=self._int(dev, "utilization_memory_percent")
        )

    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        dev = self._device(handle, "nvmlDeviceGetEncoderUtilization")
        return [self._int(dev, "encoder_percent"), 167_000]

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        dev = self._device(handle, "nvmlDeviceGetDecoderUtilization")
        return [self._int(dev, "decoder_percent"), 167_000]

    # -- thermal and power -------------------------------------------------
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        dev = self._device(handle, "nvmlDeviceGetTemperature")
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._int(dev, "temperature_celsius")

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        """As pynvml's: a ctypes array of ``c_nvmlFieldValue_t``, one per requested ID (an int, or a
        ``(fieldId, scopeId)`` pair), each with its own ``nvmlReturn``; NOT_SUPPORTED per field for
        IDs the simulator does not serve or the scenario lacks.

        The array is packed in one go from the structs' C layout (:data:`FIELD_VALUE_LAYOUT`) rather
        than field by field: pynvml's structs set every attribute through Python, and that would make
        the simulator, not the code under measurement, the cost of a field-values call."""
        dev = self._device(handle, "nvmlDeviceGetFieldValues")
        stamp = self.stamp(self.cycle) or 0
        packed = bytearray()
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
            packed += FIELD_VALUE_LAYOUT.pack(field_id, scope_id, stamp, 0, value_type, ret, raw)
        return (pynvml.c_nvmlFieldValue_t * len(fieldIds)).from_buffer_copy(packed)

    def _pcie(self, dev: SimDevice, key: str) -> int:
        pcie = dev.gpu.pcie
        if pcie is None or key not in pcie or not dev.gpu.supports("pcie"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(at(pcie[key], self.cycle))

    def _links(self, dev: SimDevice) -> dict[int, Any]:
        links: dict[int, Any] | None = self._link_index.get(dev.index)
        if links is None:
            links = self._link_index[dev.index] = {n.link: n for n in dev.gpu.nvlink}
        return links

    def _nvlink(self, dev: SimDevice, link: int, key: str, scale: float = 1.0) -> int:
        """A link's counter; a link the GPU lacks answers INVALID_ARGUMENT, as NVML does for its ID."""
        if not dev.gpu.supports("nvlink"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        found = self._links(dev).get(link)
        if found is None:
            fail(
                pynvml.NVML_ERROR_NOT_SUPPORTED if not dev.gpu.nvlink else pynvml.NVML_ERROR_INVALID_ARGUMENT
            )
        series = getattr(found, key)
        if series is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(at(series, self.cycle) * scale)

    def _nvlink_sum(self, dev: SimDevice, key: str, scale: float = 1.0) -> int:
        """A counter summed over the GPU's links (the ``scopeId = UINT_MAX`` throughput fields and the
        ``..._ERROR_COUNT_TOTAL`` ones); NOT_SUPPORTED where no link counts it."""
        if not dev.gpu.supports("nvlink"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        counted = [getattr(n, key) for n in dev.gpu.nvlink if getattr(n, key) is not None]
        if not counted:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return sum(round(at(series, self.cycle) * scale) for series in counted)

    def _nvlink_scoped(self, dev: SimDevice, link: int, key: str) -> int:
        """A throughput field: the link named by ``scopeId``, or all of them for UINT_MAX."""
        if link == ALL_LINKS:
            return self._nvlink_sum(dev, key, 1 / 1024)
        return self._nvlink(dev, link, key, 1 / 1024)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._int(self._device(handle, "nvmlDeviceGetPowerUsage"), "power_watts", 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._int(self._device(handle, "nvmlDeviceGetEnforcedPowerLimit"), "power_limit_watts", 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self._int(self._device(handle, "nvmlDeviceGetTotalEnergyConsumption"), "energy_joules", 1000)

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        return self._int(self._device(handle, "nvmlDeviceGetPerformanceState"), "performance_state")

    def nvmlDeviceGetFanSpeed(self, handle: Any) -> int:
        return self._int(self._device(handle, "nvmlDeviceGetFanSpeed"), "fan_speed_percent")

    # -- clocks ------------------------------------------------------------
    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        dev = self._device(handle, "nvmlDeviceGetClockInfo")
        keys = {pynvml.NVML_CLOCK_SM: "sm_clock_mhz", pynvml.NVML_CLOCK_MEM: "memory_clock_mhz"}
        if type not in keys:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._int(dev, keys[type])

    def _reasons(self, handle: Any, fn: str) -> int:
        dev = self._device(handle, fn)
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
        return self._int(self._device(handle, "nvmlDeviceGetPcieReplayCounter"), "pcie_replays")

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        return self._ecc(self._device(handle, "nvmlDeviceGetTotalEccErrors"), errorType, counterType)

    def _ecc(self, dev: SimDevice, errorType: int, counterType: int) -> int:
        ecc = dev.gpu.ecc
        if ecc is None or not dev.gpu.supports("ecc"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        kind = "corrected" if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else "uncorrected"
        scope = "volatile" if counterType == pynvml.NVML_VOLATILE_ECC else "aggregate"
        series = getattr(ecc, f"{kind}_{scope}")
        if series is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(at(series, self.cycle))

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
        pages = self._retired(dev)
        return round(at(pages.double_bit if double else pages.single_bit, self.cycle))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        pages = self._retired(self._device(device, "nvmlDeviceGetRetiredPagesPendingStatus"))
        return int(pages.pending)

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        return self._remapped(self._device(device, "nvmlDeviceGetRemappedRows"))

    def _remapped(self, dev: SimDevice) -> tuple[int, int, int, int]:
        rows = dev.gpu.remapped_rows
        if rows is None or not dev.gpu.supports("remapped_rows"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        c = self.cycle
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


FIELD_VALUES: dict[int, FieldServer] = {
    pynvml.NVML_FI_DEV_MEMORY_TEMP: lambda sim, dev: (_UINT, sim._int(dev, "memory_temperature_celsius")),
    pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: lambda sim, dev: (_ULL, sim._int(dev, "energy_joules", 1e3)),
    pynvml.NVML_FI_DEV_POWER_AVERAGE: lambda sim, dev: (_UINT, sim._int(dev, "power_watts", 1000)),
    pynvml.NVML_FI_DEV_POWER_INSTANT: lambda sim, dev: (_UINT, sim._int(dev, "power_watts", 1000)),
    pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: lambda sim, dev: (_ULL, sim._int(dev, "pcie_replays")),
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
FIELD_VALUES[pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES] = lambda sim, dev: (_ULL, sim._pcie(dev, "tx_bytes"))
FIELD_VALUES[pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES] = lambda sim, dev: (_ULL, sim._pcie(dev, "rx_bytes"))
_NVLINK_ERRORS = {"CRC_FLIT": "crc_flit_errors", "CRC_DATA": "crc_data_errors", "REPLAY": "replay_errors",
                  "RECOVERY": "recovery_errors"}  # fmt: skip


def _link_errors(link: int, key: str) -> FieldServer:
    return lambda sim, dev: (_ULL, sim._nvlink(dev, link, key))


def _total_errors(key: str) -> FieldServer:
    return lambda sim, dev: (_ULL, sim._nvlink_sum(dev, key))


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
"""Field IDs whose ``scopeId`` names the NVLink, or is UINT_MAX for all links (throughput in KiB, as
NVML counts it)."""

FIELD_VALUE_LAYOUT = struct.Struct("@IIqqIIQ")
"""``c_nvmlFieldValue_t`` in C: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn, value
(the 8-byte ``c_nvmlValue_t`` union; checked against ctypes in the simulator tests)."""

_ULL_OF: dict[int, Callable[[float], int]] = {
    _UINT: lambda n: int(n) & 0xFFFFFFFF,  # uiVal: the union's low 4 bytes (little-endian)
    _ULL: lambda n: int(n),
    pynvml.NVML_VALUE_TYPE_DOUBLE: lambda n: int.from_bytes(struct.pack("@d", n), sys.byteorder),
}
"""Each served value type as the union's 8 bytes read as one unsigned integer."""
