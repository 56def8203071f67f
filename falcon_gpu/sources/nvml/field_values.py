"""NVML field values: the scalar readings of one GPU in one ``nvmlDeviceGetFieldValues`` call.

Every reading that NVML also publishes under a field ID (``NVML_FI_DEV_*``) is
declared once in :data:`FIELDS`. The first reader that asks for one of a device's
fields in a cycle makes the one call for all of them (:class:`FieldBatch`); the
others take their value from its answer. On a real driver every NVML call is an
ioctl, so this turns twelve calls per GPU per cycle into one.

Each value carries its own ``nvmlReturn``, and it is honoured per field:

- SUCCESS: the number, read from the union member its ``valueType`` names;
- NOT_FOUND: no value this cycle (None);
- NOT_SUPPORTED or INVALID_ARGUMENT: when the reading has a dedicated function
  (``FieldSpec.call``), that function is used for this reading on this device
  from then on (an older driver that does not know the field ID), and *its*
  NOT_SUPPORTED is remembered the usual way; without one the field is remembered
  as not supported and not asked again;
- anything else: an error of the reader that asks for that field (counted, logged
  once), None; the other fields of the batch are not affected.

When the call as a whole is unavailable (an old binding without it, a driver that
answers NOT_SUPPORTED or an error for the call), every reading falls back to its
dedicated function (:data:`USE_CALL`), so old drivers lose nothing.

A field that is a sum of others (NVLink traffic over all links, ``scopeId`` UINT_MAX; the NVLink
error ``..._TOTAL`` counters) names them as its ``fallback``: where the driver answers the sum
NOT_SUPPORTED or INVALID_ARGUMENT, its parts are asked instead, at once (a second call in that one
cycle) and in every later batch. Fields wanted only now and then (the per-link NVLink error
counters, when a total moved) are asked in a call of their own through
:meth:`FieldBatch.when_changed`, which keeps their last answer in between.
"""

from __future__ import annotations

import ctypes
import logging
import operator
import struct
import sys
from collections.abc import Callable
from typing import Any, Final

import pynvml

from falcon_gpu.readings.device import READINGS
from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller
from falcon_gpu.sources.nvml.direct import FieldRequest

log = logging.getLogger("falcon_gpu.nvml")


class FieldSpec:
    """One reading available as a field value; ``name`` is its not-supported key. Declared once, at
    import (compared by identity)."""

    __slots__ = ("args", "call", "fallback", "field_id", "name", "quiet", "request", "scope_id")

    def __init__(
        self,
        name: str,
        field_id: int,
        call: str | None = None,
        args: tuple[Any, ...] = (),
        *,
        scope_id: int | None = None,
        fallback: tuple[FieldSpec, ...] = (),
        quiet: bool = False,
    ) -> None:
        self.name = name
        self.field_id = field_id
        self.call = call
        """The dedicated ``nvml*`` function for drivers without the field (None: there is none;
        for a member of a group, the group's function, which its reader calls)."""
        self.args = args
        """Arguments of ``call`` after the handle."""
        self.scope_id = scope_id
        """The ``scopeId`` of a scoped field (the NVLink of a per-link counter); None: unscoped."""
        self.fallback = fallback
        """Fields that give the same reading in parts (an NVLink sum's per-link counters): asked instead,
        from the same cycle on, where the driver answers this one NOT_SUPPORTED or INVALID_ARGUMENT."""
        self.quiet = quiet
        """Not supported is common (every NVLink field of a GPU without NVLink): one summary line per
        device instead of one per field."""
        self.request: int | tuple[int, int] = field_id if scope_id is None else (field_id, scope_id)
        """What ``nvmlDeviceGetFieldValues`` is given for it: the ID, or ``(fieldId, scopeId)``."""

    def __repr__(self) -> str:
        return f"FieldSpec({self.name!r}, {self.field_id})"


class UseCall:
    """The answer "ask the dedicated function": the batch cannot give this field."""

    def __repr__(self) -> str:
        return "USE_CALL"


USE_CALL: Final = UseCall()

_CORR, _UNCORR = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_VOL, _AGG = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC
_ECC = "nvmlDeviceGetTotalEccErrors"

MEMORY_TEMP: Final = FieldSpec("memory_temperature", pynvml.NVML_FI_DEV_MEMORY_TEMP)
ENERGY: Final = FieldSpec(
    "energy", pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, "nvmlDeviceGetTotalEnergyConsumption"
)
POWER_AVERAGE: Final = FieldSpec("power_average", pynvml.NVML_FI_DEV_POWER_AVERAGE)
"""Power averaged over 1 s: what ``nvmlDeviceGetPowerUsage`` answers on Ampere (but GA100) and later."""
POWER_INSTANT: Final = FieldSpec("power", pynvml.NVML_FI_DEV_POWER_INSTANT, "nvmlDeviceGetPowerUsage")
"""Instantaneous power: what ``nvmlDeviceGetPowerUsage`` answers on GA100 and older (all GPUs have it)."""
PCIE_REPLAYS: Final = FieldSpec(
    "pcie_replays", pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER, "nvmlDeviceGetPcieReplayCounter"
)
ECC: Final = (
    FieldSpec("ecc_corrected_volatile", pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, _ECC, (_CORR, _VOL)),
    FieldSpec("ecc_uncorrected_volatile", pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, _ECC, (_UNCORR, _VOL)),
    FieldSpec("ecc_corrected_aggregate", pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL, _ECC, (_CORR, _AGG)),
    FieldSpec("ecc_uncorrected_aggregate", pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL, _ECC, (_UNCORR, _AGG)),
)
"""Single-bit = corrected, double-bit = uncorrected; in :class:`EccCounts` field order."""
_PAGES, _ROWS = "nvmlDeviceGetRetiredPages", "nvmlDeviceGetRemappedRows"
RETIRED: Final = (
    FieldSpec("retired_single_bit", pynvml.NVML_FI_DEV_RETIRED_SBE, _PAGES),
    FieldSpec("retired_double_bit", pynvml.NVML_FI_DEV_RETIRED_DBE, _PAGES),
    FieldSpec("retired_pending", pynvml.NVML_FI_DEV_RETIRED_PENDING, _PAGES),
)
"""Retired page counts. Groups fall back as a whole: the health reader makes the group's calls
when any member answers USE_CALL (``call`` names them, for the log)."""
REMAPPED: Final = (
    FieldSpec("remapped_correctable", pynvml.NVML_FI_DEV_REMAPPED_COR, _ROWS),
    FieldSpec("remapped_uncorrectable", pynvml.NVML_FI_DEV_REMAPPED_UNC, _ROWS),
    FieldSpec("remapped_pending", pynvml.NVML_FI_DEV_REMAPPED_PENDING, _ROWS),
    FieldSpec("remapped_failed", pynvml.NVML_FI_DEV_REMAPPED_FAILURE, _ROWS),
)
"""Remapped rows, in :class:`RemappedRows` field order (a group, like RETIRED)."""

PCIE_TRAFFIC: Final = (
    FieldSpec("pcie_tx_bytes", getattr(pynvml, "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197)),
    FieldSpec("pcie_rx_bytes", getattr(pynvml, "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198)),
)
"""PCIe bytes transmitted and received since the driver loaded (TX, RX; nvml.h's IDs where an older
pynvml does not name them: a driver that does not know them answers NOT_SUPPORTED, logged once)."""
THROTTLE_TIME: Final = (
    FieldSpec("throttle_app_clocks", getattr(pynvml, "NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS", 80)),
    FieldSpec("throttle_base_clocks", getattr(pynvml, "NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS", 81)),
)
"""Nanoseconds the clocks were held below the application clocks by any limiter, and below the base
clocks, since the driver loaded (nvml.h: ``NVML_PERF_POLICY_TOTAL_APP_CLOCKS`` "Total time the GPU was
held below application clocks by any limiter", ``..._TOTAL_BASE_CLOCKS`` "Total time the GPU was held
below base clocks"; a violation time in nanoseconds): what the clock event reasons follow
(:mod:`falcon_gpu.sources.nvml.readers.clocks`)."""
NVLINK_LINKS: Final = 18
"""Links asked per GPU where the driver cannot sum them (NVML_NVLINK_MAX_LINKS on Hopper); the ones a
GPU lacks answer NOT_SUPPORTED once."""
NVLINK_ERROR_LINKS: Final = 12
"""Links with per-link error field IDs (``..._L0`` to ``..._L11``)."""
NVLINK_ERROR_KINDS: Final = ("CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY")
"""In :class:`~falcon_gpu.model.snapshot.NvlinkErrors` field order."""
ALL_LINKS: Final = 0xFFFFFFFF
"""The ``scopeId`` (UINT_MAX) for which nvml.h says the throughput fields answer "the aggregate value
summed up across all links"."""


def _traffic(direction: str, field_id: int) -> tuple[FieldSpec, ...]:
    return tuple(
        FieldSpec(f"nvlink_l{link}_{direction}", field_id, scope_id=link, quiet=True)
        for link in range(NVLINK_LINKS)
    )


NVLINK_TX: Final = _traffic("tx", pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)
"""Per link (index = link): data sent, KiB, the link as ``scopeId`` (asked only where the driver does
not answer :data:`NVLINK_TRAFFIC`)."""
NVLINK_RX: Final = _traffic("rx", pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)
NVLINK_ERRORS: Final = tuple(
    tuple(
        FieldSpec(
            f"nvlink_l{link}_{kind.lower()}",
            getattr(pynvml, f"NVML_FI_DEV_NVLINK_{kind}_ERROR_COUNT_L{link}"),
            quiet=True,
        )
        for link in range(NVLINK_ERROR_LINKS)
    )
    for kind in NVLINK_ERROR_KINDS
)  # fmt: skip
"""Per error kind (NVLINK_ERROR_KINDS order), per link 0-11 (index = link): the error counter."""
NVLINK_LINK_ERRORS: Final = tuple(spec for kind in NVLINK_ERRORS for spec in kind)
"""Every per-link error counter, by kind then link (the order the interconnect reader slices them)."""
NVLINK_TRAFFIC: Final = (
    FieldSpec("nvlink_tx", pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, scope_id=ALL_LINKS, quiet=True,
              fallback=NVLINK_TX),
    FieldSpec("nvlink_rx", pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, scope_id=ALL_LINKS, quiet=True,
              fallback=NVLINK_RX),
)  # fmt: skip
"""TX and RX data over all links (KiB): two values per GPU and cycle instead of 36."""
NVLINK_ERROR_TOTALS: Final = tuple(
    FieldSpec(f"nvlink_{kind.lower()}", getattr(pynvml, f"NVML_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL"),
              quiet=True, fallback=links)
    for kind, links in zip(NVLINK_ERROR_KINDS, NVLINK_ERRORS, strict=True)
)  # fmt: skip
"""Each error kind's counter "total for all" links (NVLINK_ERROR_KINDS order): four values per GPU and
cycle instead of 48; the per-link counters are asked only when a total changed (to name the link)."""
NVLINK: Final = (*NVLINK_TRAFFIC, *NVLINK_ERROR_TOTALS)
"""The NVLink fields of every cycle's batch: the two traffic sums, then the four error totals."""

DECLARED: Final = tuple(
    (FieldSpec(r.field, r.nvml.field_ids[0]), r) for r in READINGS if r.nvml is not None and r.nvml.by_table
)
"""The reading table's field-only readings (``Nvml.by_table``), with their reading: no code of their own,
read by :func:`~falcon_gpu.sources.nvml.readers.declared.read_declared` in their reader."""

FIELDS: Final = (
    MEMORY_TEMP, ENERGY, POWER_AVERAGE, POWER_INSTANT, PCIE_REPLAYS, *ECC, *RETIRED, *REMAPPED, *PCIE_TRAFFIC,
    *THROTTLE_TIME,
    *NVLINK, *(spec for spec, _ in DECLARED),
)  # fmt: skip

VALUE_ATTR: Final = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}
"""Which member of the ``c_nvmlValue_t`` union holds a value of each ``valueType``."""

LAYOUT: Final = struct.Struct("@IIqqIIQ")
"""``c_nvmlFieldValue_t`` in C: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn and
the 8-byte ``c_nvmlValue_t`` union (read as one unsigned integer; checked against ctypes in the tests)."""

_FROM_U64: Final[dict[int, Callable[[int], float]]] = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: lambda u: float(struct.unpack("<d", u.to_bytes(8, "little"))[0]),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: lambda u: float(u & 0xFFFF_FFFF),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: float,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: float,
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: lambda u: float(u - (1 << 64) if u >> 63 else u),
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: lambda u: float(
        (u & 0xFFFF_FFFF) - (1 << 32) if u & 0x8000_0000 else u & 0xFFFF_FFFF
    ),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: lambda u: float(u & 0xFFFF),
}
"""Each value type from the union's 8 bytes (little-endian: the narrow members are the low bytes)."""

_ULL: Final = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG

Decoded = tuple[int, int, float | None]
"""(nvmlReturn, valueType, the number or None for a type not known here)."""


def _decoded(raw: Any) -> list[Decoded]:
    """The answers of a field-values array, read from its bytes in one go where it is pynvml's ctypes
    array (pynvml's structs route every attribute read through Python: three per field), else by
    attribute."""
    if LITTLE_ENDIAN and isinstance(raw, ctypes.Array) and raw._type_ is pynvml.c_nvmlFieldValue_t:
        return [  # counters (most fields) are unsigned long long: the 8 bytes are the number already
            (ret, value_type, u64 if value_type == _ULL
             else None if (decode := _FROM_U64.get(value_type)) is None else decode(u64))
            for _, _, _, _, value_type, ret, u64 in LAYOUT.iter_unpack(memoryview(raw).cast("B"))
        ]  # fmt: skip
    out: list[Decoded] = []
    for value in raw:
        value_type = int(value.valueType)
        attr = VALUE_ATTR.get(value_type)
        raw_number = None if attr is None else getattr(value.value, attr)
        number = None if raw_number is None else int(raw_number) if value_type == _ULL else float(raw_number)
        out.append((int(value.nvmlReturn), value_type, number))
    return out


LITTLE_ENDIAN: Final = sys.byteorder == "little" and ctypes.sizeof(pynvml.c_nvmlFieldValue_t) == LAYOUT.size

_ROW: Final = "24xQQ"
"""One ``c_nvmlFieldValue_t`` as :data:`LAYOUT`, its first 24 bytes (IDs, timestamp, latency) skipped and
``valueType`` and ``nvmlReturn`` read as one word (little-endian: the type in the low 32 bits, the code
in the high ones; on SUCCESS, 0, the word is the type)."""


_VALUE_FORMAT: Final = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "d",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "I4x",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "Q",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "Q",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "q",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "i4x",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "H6x",
}
"""Each value type's member of the 8-byte union as a ``struct`` format (the narrow members are its low
bytes, little-endian): what :data:`_FROM_U64` computes from the whole 8 bytes, read in place."""
_AS_FLOAT: Final = frozenset(_VALUE_FORMAT) - {_ULL, pynvml.NVML_VALUE_TYPE_DOUBLE}
"""The value types answered as a float (as :data:`_FROM_U64` does) that ``struct`` reads as an int."""


class _Shape:
    """The decoder of one request (a device's list of field IDs), built once per list: its whole
    answer unpacked by one ``struct`` call laid out for the value types of the answer before (each
    union read as its own member), the few numbers ``struct`` gives as ints where a float is answered
    converted by position. Only for the usual answer: every field SUCCESS, with the value types of the
    answer before (else it is laid out anew; a type not known here or any other code: :meth:`decode`
    answers None, the general path)."""

    __slots__ = (
        "_count", "_floats", "_layout", "_words", "asked", "calls", "ids", "index", "request", "takers",
    )  # fmt: skip

    def __init__(
        self,
        ids: list[int | tuple[int, int]],
        calls: frozenset[str] = frozenset(),
        request: FieldRequest | None = None,
    ) -> None:
        self.ids = ids
        self.calls = calls
        self.request = request
        """The device's request array for ``ids`` (built once, with this decoder) on the real bindings;
        None: pynvml's wrapper builds one per call (the simulator)."""
        """The names of the fields read by their dedicated call on this device (not in ``ids``)."""
        self._count = len(ids)
        self._layout = struct.Struct("@" + _ROW * len(ids))
        self._words: tuple[int, ...] = ()
        """Each field's type-and-code word (:data:`_ROW`) in the answer the layout was built for: its
        value types, every code SUCCESS."""
        self._floats: tuple[int, ...] = ()
        self.index: dict[int | tuple[int, int], int] = {request: i for i, request in enumerate(ids)}
        """Each request's position in the answer (and in :meth:`decode`'s numbers)."""
        self.takers: dict[FieldGroup, Callable[[Any], Any] | None] = {}
        """Per group: its numbers by position in one ``itemgetter``; None: the group's per-field path."""
        self.asked: dict[str, bool] = {}
        """Per key: :meth:`FieldBatch.any_asked`'s answer for the device's request (its not-supported
        set, which a new request follows)."""

    def taker(self, group: FieldGroup) -> Callable[[Any], Any] | None:
        """``group``'s numbers out of :meth:`decode`'s list, in its order (built once per group and
        request). A field not asked (not supported here) makes it None, the per-field path; for a
        :attr:`FieldGroup.partial` group it takes the None that :meth:`FieldValues.fetch` puts after the
        numbers instead, unless the field is read by its dedicated call."""
        positions = [self.index.get(s.request) for s in group.specs]
        take: Callable[[Any], Any] | None = None
        if None not in positions:
            take = _getter(positions)
        elif group.partial and not any(
            at is None and s.name in self.calls for s, at in zip(group.specs, positions, strict=True)
        ):
            take = _getter([self._count if at is None else at for at in positions])
        self.takers[group] = take
        return take

    def decode(self, raw: Any) -> list[Any] | None:
        """The numbers in request order (each exact: an int, or a float where the type answers one)."""
        if len(raw) != self._count:
            return None
        flat = self._layout.unpack(raw)  # a ctypes array is a buffer: its bytes, read in place
        words = flat[0::2]
        if words != self._words:  # a code other than SUCCESS, or other value types than before
            if not self._relayout(words):
                return None
            flat = self._layout.unpack(raw)
        numbers = list(flat[1::2])
        for i in self._floats:
            numbers[i] = float(numbers[i])
        return numbers

    def _relayout(self, words: tuple[int, ...]) -> bool:
        """Lay the answer out for the value types of ``words``; False where a code is not SUCCESS or a
        type is not known here (the general path)."""
        if any(word >> 32 != pynvml.NVML_SUCCESS for word in words):
            return False
        types = [word & 0xFFFF_FFFF for word in words]
        if not all(t in _VALUE_FORMAT for t in types):
            return False
        self._words = words
        self._layout = struct.Struct("@" + "".join("24xQ" + _VALUE_FORMAT[t] for t in types))
        self._floats = tuple(i for i, t in enumerate(types) if t in _AS_FLOAT)
        return True


def _getter(keys: list[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """``itemgetter(*keys)`` that answers a tuple for one key too."""
    take = operator.itemgetter(*keys)
    return take if len(keys) > 1 else lambda values: (take(values),)


_FIELD_VALUES: Final = "field_values"
"""The call's not-supported key."""
_FIELD_VALUES_FN: Final = "nvmlDeviceGetFieldValues"
_REQUESTS_KEPT: Final = 256
"""Request arrays kept for the calls of their own (a few per GPU: a fallback's parts, the per-link
NVLink errors); more and they are all built anew."""

_OLD_DRIVER: Final = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT})

Answer = float | None | UseCall


class Failed:
    """A field that answered an unexpected code: the error of the reader that asks for it."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


_Answers = dict[int | tuple[int, int], Answer | Failed]
"""Each asked field's answer by request."""
_Asked = tuple[int, list[int | tuple[int, int]], list[FieldSpec], frozenset[str], "_Shape | None"]


class FieldValues:
    """Per source: which fields each device is asked in its batch, and which use their own call."""

    def __init__(self, nvml: NvmlCaller, specs: tuple[FieldSpec, ...] = FIELDS) -> None:
        self._nvml = nvml
        self._specs = specs
        self._via_call: set[tuple[str, str]] = set()
        self._ids: dict[str, _Asked] = {}
        """Per scope: (the caller's not-supported generation, the field IDs to ask, their specs, the
        names of the fields whose fallback fields are asked in their place, the decoder of that request
        or None where its bytes cannot be read)."""
        self._quiet = 0
        """Quiet fields found not supported in the current fetch (logged as one line)."""
        self._quiet_names: list[str] = []
        """Their names, in request order."""
        self._fell_back: list[FieldSpec] = []
        """Fields found replaced by their fallback fields in the current fetch."""
        self._kept: dict[tuple[str, str], tuple[Any, list[float | None]]] = {}
        """Per scope and key: (token, numbers) of :meth:`when_changed`."""
        self._any: dict[tuple[str, str], tuple[int, bool]] = {}
        """Per scope and key: (the not-supported generation, :meth:`any_asked`'s answer then)."""
        self._requests: dict[tuple[str, tuple[int | tuple[int, int], ...]], FieldRequest] = {}
        """Per scope and field list asked on its own (:meth:`ask`, a fallback's parts): its request
        array on the real bindings (at most :data:`_REQUESTS_KEPT`; the batch's is its decoder's)."""
        self.decoded_by: _Shape | None = None
        """The decoder of the usual answer (:class:`_Shape`) where the last :meth:`fetch` came from it
        alone: its answer is then the list of numbers in request order (every one a number, none a
        Failed, USE_CALL or None), which :class:`FieldBatch` reads by position; None: a dict by request."""

    def report(self, failed: Failed) -> None:
        self._nvml.errors.append(failed.error)

    def batch(self, scope: str, handle: Any) -> FieldBatch:
        return FieldBatch(self, scope, handle)

    def supported(self, scope: str, spec: FieldSpec) -> bool:
        return self._nvml.supported(scope, spec.name)

    def when_changed(
        self, scope: str, handle: Any, key: str, token: Any, specs: tuple[FieldSpec, ...]
    ) -> list[float | None]:
        kept = self._kept.get((scope, key))
        if kept is not None and kept[0] == token:
            return kept[1]
        numbers = self.ask(scope, handle, specs)
        if numbers is None:
            self._kept.pop((scope, key), None)
            return [None] * len(specs)
        self._kept[(scope, key)] = (token, numbers)
        return numbers

    def uses_call(self, scope: str, spec: FieldSpec) -> bool:
        return (scope, spec.name) in self._via_call

    def _ids_for(self, scope: str) -> _Asked:
        generation = self._nvml.generation
        cached = self._ids.get(scope)
        if cached is not None and cached[0] == generation:
            return cached
        specs = self._askable(scope, self._specs)
        parted = frozenset(
            s.name
            for s in self._specs
            if s.fallback and not self._nvml.supported(scope, s.name) and self._askable(scope, s.fallback)
        )
        ids = [s.request for s in specs]
        calls = frozenset(name for where, name in self._via_call if where == scope)
        request = FieldRequest(ids) if self._nvml.functions is not None and ids else None
        shape = _Shape(ids, calls, request) if LITTLE_ENDIAN and ids else None
        cached = self._ids[scope] = (generation, ids, specs, parted, shape)
        return cached

    def any_asked(self, scope: str, key: str, specs: tuple[FieldSpec, ...]) -> bool:
        """Whether any of ``specs`` (or of their fallback fields) is still asked on ``scope``: False once
        the driver answered all of them NOT_SUPPORTED (cached until the not-supported set changes)."""
        generation = self._nvml.generation
        cached = self._any.get((scope, key))
        if cached is not None and cached[0] == generation:
            return cached[1]
        asked = bool(self._askable(scope, specs))
        self._any[(scope, key)] = (generation, asked)
        return asked

    def parts_asked(self, scope: str, spec: FieldSpec) -> bool:
        """Whether ``spec``'s fallback fields are asked in place of it (some of them supported)."""
        return spec.name in self._ids_for(scope)[3]

    def _askable(self, scope: str, specs: tuple[FieldSpec, ...]) -> list[FieldSpec]:
        """``specs`` minus those not supported or read by their own call, a not supported one replaced
        by its fallback fields."""
        out: list[FieldSpec] = []
        supported = self._nvml.supported
        for s in specs:
            if supported(scope, s.name):
                if (scope, s.name) not in self._via_call:
                    out.append(s)
            elif s.fallback:
                out += self._askable(scope, s.fallback)
        return out

    def fetch(self, scope: str, handle: Any) -> _Answers | list[Any] | None:
        """This cycle's answers by field ID (by position where :attr:`decoded_by` is set: the numbers,
        then one None, the slot of a partial group's fields that are not asked); None: the call is
        unavailable (use the dedicated ones)."""
        cached = self._ids.get(scope)  # _ids_for, written out: once per GPU and cycle
        if cached is None or cached[0] != self._nvml.generation:
            cached = self._ids_for(scope)
        _, ids, specs, _, shape = cached
        self.decoded_by = None
        raw = self._raw(scope, handle, ids, None if shape is None else shape.request)
        if raw is ABSENT:
            return None
        if shape is not None and isinstance(raw, ctypes.Array) and raw._type_ is pynvml.c_nvmlFieldValue_t:
            fast = shape.decode(raw)
            if fast is not None:
                self.decoded_by = shape
                fast.append(None)
                return fast
        self._quiet = 0
        self._quiet_names = []
        self._fell_back = []
        answers = self._general(scope, specs, raw)
        if self._fell_back:  # their parts, in the same cycle (once per device)
            parts = self._askable(scope, tuple(f for s in self._fell_back for f in s.fallback))
            more = self._ask(scope, handle, [s.request for s in parts], parts)
            answers.update(more or {})
        self._log_quiet(scope)
        return answers

    def _log_quiet(self, scope: str) -> None:
        """One line for the NVLink fields found not supported in one call, naming the first and the last
        (the driver does not answer them: a GPU without NVLink, or counters its generation lacks, such
        as the ``_L0``-``_L11`` error fields where the driver counts errors per link by ``scopeId``)."""
        if self._quiet:
            first, last = self._quiet_names[0], self._quiet_names[-1]
            named = first if first == last else f"{first} ... {last}"
            self._nvml.unsupported.note(scope, f"{self._quiet} NVLink fields ({named})")

    def ask(self, scope: str, handle: Any, specs: tuple[FieldSpec, ...]) -> list[float | None] | None:
        """The numbers of ``specs`` (no dedicated calls) in a call of their own; None: the call failed."""
        askable = self._askable(scope, specs)
        self._quiet = 0
        self._quiet_names = []
        answers = self._ask(scope, handle, [s.request for s in askable], askable)
        self._log_quiet(scope)
        if answers is None:
            return None
        return self.numbers_of(answers, specs)

    def numbers_of(self, answers: _Answers, specs: tuple[FieldSpec, ...]) -> list[float | None]:
        out: list[float | None] = []
        for spec in specs:
            got = answers.get(spec.request)
            if isinstance(got, Failed):
                self.report(got)
                got = None
            out.append(None if isinstance(got, UseCall) else got)
        return out

    def _raw(
        self, scope: str, handle: Any, ids: list[int | tuple[int, int]], request: FieldRequest | None = None
    ) -> Any:
        """The answer array of ``ids``: on the real bindings through a request array kept per device and
        field list (``request``, the batch's, else one kept here per scope and list), with NVML's C
        function called straight (:mod:`falcon_gpu.sources.nvml.direct`); through pynvml's wrapper
        otherwise (the simulator, or a library without the function). ABSENT: the call failed."""
        if not ids:
            return []
        nvml = self._nvml
        functions = nvml.functions
        fn = None if functions is None else functions.get(_FIELD_VALUES_FN)
        if fn is None:
            return nvml.call(scope, _FIELD_VALUES, _FIELD_VALUES_FN, handle, ids)
        if not nvml.supported(scope, _FIELD_VALUES):
            return ABSENT
        if request is None:
            key = (scope, tuple(ids))
            request = self._requests.get(key)
            if request is None:
                if len(self._requests) >= _REQUESTS_KEPT:
                    self._requests.clear()
                request = self._requests[key] = FieldRequest(ids)
        ret = request.call(fn, handle)
        if ret != pynvml.NVML_SUCCESS:
            return nvml.code_failed(scope, _FIELD_VALUES, _FIELD_VALUES_FN, ret)
        return request.array

    def _ask(
        self, scope: str, handle: Any, ids: list[int | tuple[int, int]], specs: list[FieldSpec]
    ) -> _Answers | None:
        raw = self._raw(scope, handle, ids)
        return None if raw is ABSENT else self._general(scope, specs, raw)

    def _general(self, scope: str, specs: list[FieldSpec], raw: Any) -> _Answers:
        """Each field's answer by request, its code honoured per field."""
        # NVML answers in request order (the array it was given, filled in place).
        return {
            spec.request: number
            if ret == pynvml.NVML_SUCCESS and number is not None
            else self._answer(scope, spec, ret, value_type, number)
            for spec, (ret, value_type, number) in zip(specs, _decoded(raw), strict=True)
        }

    def _answer(
        self, scope: str, spec: FieldSpec, ret: int, value_type: int, number: float | None
    ) -> Answer | Failed:
        if ret == pynvml.NVML_SUCCESS:
            if number is None:
                return Failed(f"{spec.name}: unknown field value type {value_type}")
            return number
        if ret == pynvml.NVML_ERROR_NOT_FOUND:
            return None
        if ret in _OLD_DRIVER:
            if spec.fallback:
                self._nvml.mark_not_supported(scope, spec.name, quiet=True)
                self._fell_back.append(spec)
                log.debug("NVML: field %s of %s answered code %d; asking its %d parts instead",
                          spec.field_id, scope, ret, len(spec.fallback))  # fmt: skip
                return None
            if spec.call is None:
                if spec.quiet:
                    self._quiet += 1
                    self._quiet_names.append(spec.name)
                self._nvml.mark_not_supported(scope, spec.name, quiet=spec.quiet)
                return None
            self._via_call.add((scope, spec.name))
            self._ids.pop(scope, None)
            # debug: the dedicated call logs "not supported" itself if the reading is missing for good
            log.debug("NVML: field %s of %s answered code %d; using %s instead", spec.field_id, scope, ret,
                      spec.call)  # fmt: skip
            return USE_CALL
        return Failed(f"{spec.name}: field {spec.field_id} answered NVML error code {ret}")


class FieldGroup:
    """Fields a reader takes together (built once, at import; compared by identity): their numbers by
    one ``itemgetter`` per device's request (:meth:`_Shape.taker`).

    ``partial``: a field the device is not asked (not supported there, or its fallback fields asked in
    its place) is None in the group's look-up instead of sending the whole group the per-field way (for
    readers that treat None as absent anyway: the thermal/power reader, whose T.Limit fields are not on
    every GPU, and the interconnect reader, whose NVLink fields are not on a GPU without NVLink)."""

    __slots__ = ("partial", "specs")

    def __init__(self, specs: tuple[FieldSpec, ...], *, partial: bool = False) -> None:
        self.specs = specs
        self.partial = partial


_UNFETCHED: Final[list[Any]] = []
""":attr:`FieldBatch._numbers` before the batch is fetched (never filled: compared by identity)."""


class FieldBatch:
    """One device's field values in one cycle, fetched on first use (by the reader that first asks:
    the call's error, if any, is that reader's)."""

    __slots__ = ("_handle", "_numbers", "_owner", "_scope", "_shape", "_values")

    def __init__(self, owner: FieldValues, scope: str, handle: Any) -> None:
        self._owner = owner
        self._scope = scope
        self._handle = handle
        self._numbers: list[Any] = _UNFETCHED
        """The usual answer's numbers in request order (then one None); empty once fetched otherwise."""
        self._values: _Answers | None = None
        """The general answer by request; None where the call is unavailable or the answer is usual."""
        self._shape: _Shape | None = None
        """Where the answer is the usual one (:attr:`FieldValues.decoded_by`): its decoder, whose
        positions index :attr:`_numbers`."""

    def _fetch(self) -> list[Any]:
        got = self._owner.fetch(self._scope, self._handle)
        if isinstance(got, list):
            self._shape = self._owner.decoded_by
            self._numbers = got
        else:
            self._values = got
            self._numbers = []
        return self._numbers

    def fast(self, group: FieldGroup) -> tuple[Any, ...] | None:
        """The numbers of ``group``, in its order, where this cycle's answer is the usual one (every field
        SUCCESS) and asked all of them (or, for a partial group, each one it did not ask is None, and
        none is read by its own call): one ``itemgetter`` call instead of a :meth:`get` per field. None
        otherwise (a field not supported, read by its own call, failed or without a value): the caller
        takes the per-field path, which keeps each code's meaning."""
        numbers = self._numbers
        if numbers is _UNFETCHED:
            numbers = self._fetch()
        shape = self._shape
        if shape is None:
            return None
        try:
            take = shape.takers[group]
        except KeyError:  # the first cycle of this request
            take = shape.taker(group)
        return None if take is None else take(numbers)

    def values(self, nvml: NvmlCaller, group: FieldGroup) -> tuple[Any, ...] | list[Any]:
        """Each field of ``group`` (its order): its number, or its dedicated call's answer where the batch
        cannot give it; None where there is none. By :meth:`fast` where it can."""
        got = self.fast(group)
        if got is not None:
            return got
        out = []
        for spec in group.specs:
            value = self.value(nvml, spec)
            out.append(None if value is ABSENT else value)
        return out

    def get(self, spec: FieldSpec) -> Answer:
        """The field's number, None (no value), or USE_CALL (ask its dedicated function)."""
        if self._numbers is _UNFETCHED:
            self._fetch()
        shape = self._shape
        if shape is not None:
            at = shape.index.get(spec.request)
            if at is not None:
                return self._numbers[at]  # type: ignore[no-any-return]
            return USE_CALL if self._owner.uses_call(self._scope, spec) else None
        values = self._values
        if values is None:
            return USE_CALL
        request = spec.request
        if request not in values:  # not asked: not supported (None), or read by its own call
            return USE_CALL if self._owner.uses_call(self._scope, spec) else None
        got = values[request]
        if isinstance(got, Failed):
            self._owner.report(got)
            return None
        return got

    def numbers(self, specs: tuple[FieldSpec, ...]) -> list[float | None]:
        """The numbers of fields that have no dedicated call (None each where absent), for readers
        that take many without the per-field fallback checks of :meth:`get`."""
        numbers = self._numbers
        if numbers is _UNFETCHED:
            numbers = self._fetch()
        shape = self._shape
        if shape is not None:
            index = shape.index
            return [None if (at := index.get(spec.request)) is None else numbers[at] for spec in specs]
        values = self._values
        if not values:
            return [None] * len(specs)
        return self._owner.numbers_of(values, specs)

    def supported(self, spec: FieldSpec) -> bool:
        """False once the driver answered ``spec`` NOT_SUPPORTED (its fallback fields are asked instead)."""
        return self._owner.supported(self._scope, spec)

    def any_asked(self, key: str, specs: tuple[FieldSpec, ...]) -> bool:
        """False once every one of ``specs`` and of their fallback fields is known not supported here
        (``key`` names the group: the answer is cached per device and group, and with the usual answer's
        decoder, which lasts as long as the set of fields NVML refused on the device)."""
        shape = self._shape
        if shape is None:
            return self._owner.any_asked(self._scope, key, specs)
        try:
            return shape.asked[key]
        except KeyError:
            asked = shape.asked[key] = self._owner.any_asked(self._scope, key, specs)
            return asked

    def parts_asked(self, spec: FieldSpec) -> bool:
        """True where ``spec`` is not supported and (some of) its fallback fields are asked instead."""
        return self._owner.parts_asked(self._scope, spec)

    def ask(self, specs: tuple[FieldSpec, ...]) -> list[float | None] | None:
        """The numbers of ``specs`` (fields outside the batch, none with a dedicated call) in a call of
        their own, now; None: the call failed. For fields read now and then (the NVLink data-link error
        counters, with the slow readings)."""
        return self._owner.ask(self._scope, self._handle, specs)

    def when_changed(self, key: str, token: Any, specs: tuple[FieldSpec, ...]) -> list[float | None]:
        """The numbers of ``specs``, asked in a call of their own only when ``token`` differs from the
        one they were last asked under (the per-link NVLink errors, when an error total moved), else
        the numbers kept from then: the counters they sum cannot have moved either."""
        return self._owner.when_changed(self._scope, self._handle, key, token, specs)

    def value(self, nvml: NvmlCaller, spec: FieldSpec) -> Any:
        """The field's number, or its dedicated call's answer where the batch cannot give it; ABSENT: none."""
        got = self.get(spec)
        if isinstance(got, UseCall):
            if spec.call is None:
                return ABSENT
            return nvml.call(self._scope, spec.name, spec.call, self._handle, *spec.args)
        return ABSENT if got is None else got
