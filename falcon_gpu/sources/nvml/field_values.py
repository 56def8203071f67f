"""NVML field values: the scalar readings of one GPU in one ``nvmlDeviceGetFieldValues`` call.

Every reading that NVML also publishes under a field ID (``NVML_FI_DEV_*``) is one
:class:`FieldSpec`: the reading table's rows are built from the table
(:func:`table_fields`), the others (ECC, retired pages, remapped rows, throttle time, NVLink)
are declared here. The first reader that asks for a device's values in a cycle makes the one
call for all of them (:class:`FieldBatch`); every reader takes its numbers through one
accessor, :meth:`FieldBatch.values`, a tuple in its group's order. On a real driver every NVML
call is an ioctl, so this turns twelve calls per GPU per cycle into one.

The answer array is read by one decoder (:meth:`_Request.decode`): one ``struct`` unpack laid out
for the value types of the answer before, and each value's ``nvmlReturn`` honoured per field:

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
dedicated function, so old drivers lose nothing.

A field that is a sum of others (NVLink traffic over all links, ``scopeId`` UINT_MAX; the NVLink
error ``..._TOTAL`` counters) names them as its ``fallback``: where the driver answers the sum
NOT_SUPPORTED or INVALID_ARGUMENT, its parts are asked instead, at once (the batch is asked again,
in that one cycle) and in every later batch. Fields wanted only now and then (the per-link NVLink
error counters, when a total moved) are asked in a call of their own through
:meth:`FieldBatch.when_changed`, which keeps their last answer in between.
"""

from __future__ import annotations

import ctypes
import logging
import operator
import struct
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any, Final

import pynvml

from falcon_gpu.readings.device import BY_FIELD, READINGS
from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller
from falcon_gpu.sources.nvml.direct import FieldRequest

log = logging.getLogger("falcon_gpu.nvml")


class Call:
    """A dedicated ``nvml*`` call a field falls back to: its not-supported key, the function and the
    arguments after the handle. Fields that share one (the remapped rows) are answered by one call per
    cycle, each taking its ``member``."""

    __slots__ = ("args", "fn", "key")

    def __init__(self, key: str, fn: str, args: tuple[Any, ...] = ()) -> None:
        self.key = key
        self.fn = fn
        self.args = args


class FieldSpec:
    """One reading available as a field value; ``name`` is its not-supported key. Declared once, at
    import."""

    __slots__ = ("call", "fallback", "field_id", "member", "name", "quiet", "request")

    def __init__(
        self,
        name: str,
        field_id: int,
        call: Call | None = None,
        *,
        member: int | Callable[[Any], Any] | None = None,
        scope_id: int | None = None,
        fallback: tuple[FieldSpec, ...] = (),
        quiet: bool = False,
    ) -> None:
        self.name = name
        self.field_id = field_id
        self.call = call
        """The dedicated function for drivers without the field (None: there is none)."""
        self.member = member
        """Where in ``call``'s answer: an index, or a function of it (``len`` of a page list); None: the
        answer itself."""
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


def table_fields(field: str) -> tuple[FieldSpec, ...]:
    """The field values of the reading table's row ``field``, preferred first; the row's dedicated
    call (if any) goes with the last one, under the reading's name."""
    reading = BY_FIELD[field]
    nvml = reading.nvml
    if nvml is None or not nvml.field_ids:
        raise ValueError(f"{field} has no NVML field ID in the reading table")
    last = len(nvml.field_ids) - 1
    call = None if nvml.call is None else Call(field, nvml.call, nvml.args)
    return tuple(
        FieldSpec(field, field_id, call) if i == last else FieldSpec(f"{field}_{field_id}", field_id)
        for i, field_id in enumerate(nvml.field_ids)
    )


_CORR, _UNCORR = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_VOL, _AGG = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC


def _ecc(name: str, field_id: int, *args: int) -> FieldSpec:
    return FieldSpec(name, field_id, Call(name, "nvmlDeviceGetTotalEccErrors", args))


TABLE_FIELDS: Final = MappingProxyType(
    {r.field: table_fields(r.field) for r in READINGS if r.nvml is not None and r.nvml.field_ids}
)
"""The field values of each reading-table row that NVML has as one (built once: each spec is asked in the
batch and read by its reader, or by the generic table reader)."""
(MEMORY_TEMP,) = TABLE_FIELDS["memory_temperature_celsius"]
(ENERGY,) = TABLE_FIELDS["energy_joules"]
POWER_AVERAGE, POWER_INSTANT = TABLE_FIELDS["power_watts"]
"""The 1 s average (what ``nvmlDeviceGetPowerUsage`` answers on Ampere but GA100 and later), then the
instant value (GA100 and older; all GPUs have it) with the call."""
(PCIE_REPLAYS,) = TABLE_FIELDS["pcie_replays"]
PCIE_TRAFFIC: Final = (*TABLE_FIELDS["pcie_tx_bytes"], *TABLE_FIELDS["pcie_rx_bytes"])
"""PCIe bytes transmitted and received since the driver loaded (TX, RX)."""
ECC: Final = (
    _ecc("ecc_corrected_volatile", pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, _CORR, _VOL),
    _ecc("ecc_uncorrected_volatile", pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, _UNCORR, _VOL),
    _ecc("ecc_corrected_aggregate", pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL, _CORR, _AGG),
    _ecc("ecc_uncorrected_aggregate", pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL, _UNCORR, _AGG),
)
"""Single-bit = corrected, double-bit = uncorrected; in :class:`EccCounts` field order."""
_PAGES, _RP = "nvmlDeviceGetRetiredPages", "retired_pages"
_SBE_PAGES = pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
_DBE_PAGES = pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
RETIRED: Final = (
    FieldSpec("retired_single_bit", pynvml.NVML_FI_DEV_RETIRED_SBE, Call(_RP, _PAGES, (_SBE_PAGES,)),
              member=len),
    FieldSpec("retired_double_bit", pynvml.NVML_FI_DEV_RETIRED_DBE, Call(_RP, _PAGES, (_DBE_PAGES,)),
              member=len),
    FieldSpec("retired_pending", pynvml.NVML_FI_DEV_RETIRED_PENDING,
              Call("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus")),
)  # fmt: skip
"""Retired page counts (by call: the length of each cause's page list) and whether a retirement is
pending."""
_ROWS: Final = Call("remapped_rows", "nvmlDeviceGetRemappedRows")
REMAPPED: Final = tuple(
    FieldSpec(name, field_id, _ROWS, member=at)
    for at, (name, field_id) in enumerate((
        ("remapped_correctable", pynvml.NVML_FI_DEV_REMAPPED_COR),
        ("remapped_uncorrectable", pynvml.NVML_FI_DEV_REMAPPED_UNC),
        ("remapped_pending", pynvml.NVML_FI_DEV_REMAPPED_PENDING),
        ("remapped_failed", pynvml.NVML_FI_DEV_REMAPPED_FAILURE),
    ))
)  # fmt: skip
"""Remapped rows, in :class:`RemappedRows` field order (by call: one ``nvmlDeviceGetRemappedRows``, each
its member)."""
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

FIELDS: Final = (
    *(spec for specs in TABLE_FIELDS.values() for spec in specs), *ECC, *RETIRED, *REMAPPED, *THROTTLE_TIME,
    *NVLINK,
)  # fmt: skip
"""Every field of a device's batch, in request order."""

VALUE_ATTR: Final = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}
"""Which member of the ``c_nvmlValue_t`` union holds a value of each ``valueType`` (for the tests and
benchmarks that read pynvml's structs)."""

LAYOUT: Final = struct.Struct("@IIqqIIQ")
"""``c_nvmlFieldValue_t`` in C: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn and
the 8-byte ``c_nvmlValue_t`` union (checked against ctypes at import)."""
if ctypes.sizeof(pynvml.c_nvmlFieldValue_t) != LAYOUT.size:  # pragma: no cover - a pynvml we do not know
    raise ImportError("pynvml's c_nvmlFieldValue_t is not the C layout this decoder reads")

_ROW: Final = "24xQ"
"""One ``c_nvmlFieldValue_t`` up to its value: the first 24 bytes (IDs, timestamp, latency) skipped,
``valueType`` and ``nvmlReturn`` read as one native word; the union follows, read as the member its type
names (:data:`_VALUE_FORMAT`)."""
_ULL: Final = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
_VALUE_FORMAT: Final = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "d",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "I4x",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "Q",
    _ULL: "Q",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "q",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "i4x",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "H6x",
}
"""Each value type's member of the 8-byte union as a ``struct`` format (the narrow members are its low
bytes on little-endian; on big-endian their offset is 0 as well: a C union's members all start there)."""
_AS_FLOAT: Final = frozenset(_VALUE_FORMAT) - {_ULL, pynvml.NVML_VALUE_TYPE_DOUBLE}
"""The value types answered as a float that ``struct`` reads as an int (counters, ULL, stay exact ints)."""
_SUCCESS: Final = pynvml.NVML_SUCCESS
_OLD_DRIVER: Final = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT})
_FIELD_VALUES: Final = "field_values"
"""The call's not-supported key."""
_FIELD_VALUES_FN: Final = "nvmlDeviceGetFieldValues"


def _split(word: int) -> tuple[int, int]:
    """(valueType, nvmlReturn) of a type-and-code word."""
    value_type, ret = struct.unpack("@II", struct.pack("@Q", word))
    return value_type, ret


_KNOWN: Final = {struct.unpack("@Q", struct.pack("@II", t, _SUCCESS))[0]: t for t in _VALUE_FORMAT}
"""The word of a SUCCESS answer of each value type known here (the usual answer) -> that type."""


class FieldGroup:
    """Fields a reader takes together (declared once, at import): :meth:`FieldBatch.values` answers
    their values in this order, through one ``itemgetter`` per device's request."""

    __slots__ = ("specs",)

    def __init__(self, specs: Sequence[FieldSpec]) -> None:
        self.specs = tuple(specs)

    def __repr__(self) -> str:
        return f"FieldGroup({[s.name for s in self.specs]})"


class _Plan:
    """How one group is taken from one request's numbers: positions (the slot after the numbers, None,
    for a field not asked), and the fields that are read by their dedicated call instead."""

    __slots__ = ("calls", "take")

    def __init__(self, take: Callable[[Any], Any], calls: tuple[tuple[int, FieldSpec], ...]) -> None:
        self.take = take
        self.calls = calls


class _Request:
    """What one device is asked (per not-supported generation): the fields, their positions, the request
    array on the real bindings, and the one decoder of its answer."""

    __slots__ = (
        "_floats", "_layout", "_odd", "_words", "any", "by_call", "count", "generation", "ids", "index",
        "parts", "plans", "request", "specs",
    )  # fmt: skip

    def __init__(
        self,
        generation: int,
        specs: list[FieldSpec],
        parts: frozenset[str],
        by_call: set[str],
        direct: bool,
    ) -> None:
        self.generation = generation
        self.specs = specs
        self.ids = [s.request for s in specs]
        self.count = len(specs)
        self.parts = parts
        """The names of the fields whose fallback fields are asked in their place."""
        self.by_call = by_call
        """The names of the fields read by their dedicated call on this device (grows within a cycle
        where a field is first refused: the plans are dropped then)."""
        self.index = {request: i for i, request in enumerate(self.ids)}
        self.request = FieldRequest(self.ids) if direct and self.ids else None
        """The request array, built once (the real bindings); None: pynvml's wrapper builds one."""
        self.plans: dict[FieldGroup, _Plan] = {}
        """Per group (declared at import: as many as the readers have)."""
        self.any: dict[str, bool] = {}
        """Per key: :meth:`FieldBatch.any_asked`'s answer."""
        self._words: tuple[int, ...] = ()
        self._layout = struct.Struct("@" + (_ROW + "Q") * self.count)
        self._floats: tuple[int, ...] = ()
        self._odd: list[tuple[int, int, int]] = []
        """(position, value type, code) of each answer word that is not SUCCESS with a known type: the
        words decide it, so it is worked out with the layout, not per answer (read, never changed)."""

    def plan(self, group: FieldGroup) -> _Plan:
        positions = [self.index.get(s.request, self.count) for s in group.specs]
        take = operator.itemgetter(*positions)
        calls = tuple(
            (i, s) for i, s in enumerate(group.specs) if s.call is not None and s.name in self.by_call
        )
        plan = self.plans[group] = _Plan(
            take if len(positions) > 1 else (lambda numbers: (take(numbers),)), calls
        )
        return plan

    def decode(self, raw: Any) -> tuple[list[Any], list[tuple[int, int, int]]]:
        """The numbers in request order (an exact int, or a float where the type answers one; None where
        the field gave none), and each field that did not answer SUCCESS with a known type: (position,
        code, value type). One ``struct`` unpack, laid out anew only when the codes or value types
        differ from the answer before."""
        flat = self._layout.unpack(raw)  # a ctypes array is a buffer: its bytes, read in place
        words = flat[0::2]
        if words != self._words:
            self._relayout(words)
            flat = self._layout.unpack(raw)
        numbers = list(flat[1::2])
        for i in self._floats:
            numbers[i] = float(numbers[i])
        for i, _, _ in self._odd:
            numbers[i] = None
        numbers.append(None)  # the slot of a field not asked
        return numbers, self._odd

    def _relayout(self, words: tuple[int, ...]) -> None:
        types = [_KNOWN.get(w, _ULL) for w in words]  # an unusual one is read raw (and set to None)
        self._words = words
        self._layout = struct.Struct("@" + "".join(_ROW + _VALUE_FORMAT[t] for t in types))
        self._floats = tuple(i for i, t in enumerate(types) if t in _AS_FLOAT)
        self._odd = [(i, *_split(w)) for i, w in enumerate(words) if w not in _KNOWN]


def _field_array(raw: Any) -> Any:
    """``raw`` as a ctypes array of ``c_nvmlFieldValue_t`` (what pynvml and the simulator answer; a
    sequence of the structs is copied into one)."""
    if isinstance(raw, ctypes.Array) and raw._type_ is pynvml.c_nvmlFieldValue_t:
        return raw
    return (pynvml.c_nvmlFieldValue_t * len(raw))(*raw)


class FieldValues:
    """Per source: what each device is asked in its batch, which fields use their own call, and the
    calls of their own kept between cycles. Everything here is keyed by device (scope)."""

    def __init__(self, nvml: NvmlCaller, specs: tuple[FieldSpec, ...] = FIELDS) -> None:
        self._nvml = nvml
        self.specs = specs
        self._by_call: dict[str, set[str]] = {}
        """Per scope: the fields read by their dedicated call."""
        self._asked: dict[str, _Request] = {}
        """Per scope: its request for the caller's current not-supported generation."""
        self._own: dict[tuple[str, tuple[FieldSpec, ...]], _Request] = {}
        """Per scope and field list asked in a call of its own (:meth:`ask`): its request."""
        self._kept: dict[tuple[str, str], tuple[Any, list[Any]]] = {}
        """Per scope and key: (token, numbers) of :meth:`when_changed`."""

    def batch(self, scope: str, handle: Any) -> FieldBatch:
        return FieldBatch(self, scope, handle)

    def request(self, scope: str) -> _Request:
        """``scope``'s request for the current not-supported generation (built when it changed)."""
        asked = self._asked.get(scope)
        generation = self._nvml.generation
        if asked is None or asked.generation != generation:
            asked = self._asked[scope] = self._build(scope, self.specs)
        return asked

    def _build(self, scope: str, specs: tuple[FieldSpec, ...]) -> _Request:
        by_call = self._by_call.setdefault(scope, set())
        supported = self._nvml.supported
        parts = frozenset(
            s.name
            for s in specs
            if s.fallback and not supported(scope, s.name) and self.askable(scope, s.fallback)
        )
        return _Request(
            self._nvml.generation,
            self.askable(scope, specs),
            parts,
            by_call,
            self._nvml.functions is not None,
        )

    def askable(self, scope: str, specs: Sequence[FieldSpec]) -> list[FieldSpec]:
        """``specs`` minus those not supported or read by their own call, a not supported one replaced
        by its fallback fields."""
        out: list[FieldSpec] = []
        supported = self._nvml.supported
        by_call = self._by_call.get(scope, ())
        for s in specs:
            if supported(scope, s.name):
                if s.name not in by_call:
                    out.append(s)
            elif s.fallback:
                out += self.askable(scope, s.fallback)
        return out

    def fetch(
        self, scope: str, handle: Any, asked: _Request
    ) -> tuple[list[Any], dict[int, str], bool] | None:
        """The numbers of ``asked`` (then one None), the errors of fields that failed, by position, and
        whether a sum was found refused (its fallback fields are asked from the next request on); None:
        the call is unavailable (every field by its dedicated call)."""
        raw = self._raw(scope, handle, asked)
        if raw is ABSENT:
            return None
        numbers, odd = asked.decode(_field_array(raw)) if asked.count else ([None], [])
        failed: dict[int, str] = {}
        fell_back = False
        quiet: list[str] = []
        for i, value_type, ret in odd:
            spec = asked.specs[i]
            if ret == _SUCCESS:
                failed[i] = f"{spec.name}: unknown field value type {value_type}"
            elif ret == pynvml.NVML_ERROR_NOT_FOUND:
                pass
            elif ret not in _OLD_DRIVER:
                failed[i] = f"{spec.name}: field {spec.field_id} answered NVML error code {ret}"
            elif spec.fallback:
                fell_back = True
                self._nvml.mark_not_supported(scope, spec.name, quiet=True)
                log.debug("NVML: field %s of %s answered code %d; asking its %d parts instead",
                          spec.field_id, scope, ret, len(spec.fallback))  # fmt: skip
            elif spec.call is None:
                if spec.quiet:
                    quiet.append(spec.name)
                self._nvml.mark_not_supported(scope, spec.name, quiet=spec.quiet)
            else:
                asked.by_call.add(spec.name)
                asked.plans.clear()
                self._asked.pop(scope, None)
                # debug: the dedicated call logs "not supported" itself if the reading is missing for good
                log.debug("NVML: field %s of %s answered code %d; using %s instead", spec.field_id, scope,
                          ret, spec.call.fn)  # fmt: skip
        if quiet:
            first, last = quiet[0], quiet[-1]
            named = first if first == last else f"{first} ... {last}"
            self._nvml.unsupported.note(scope, f"{len(quiet)} NVLink fields ({named})")
        return numbers, failed, fell_back

    def _raw(self, scope: str, handle: Any, asked: _Request) -> Any:
        """The answer array of ``asked``: on the real bindings through its request array, with NVML's C
        function called straight (:mod:`falcon_gpu.sources.nvml.direct`); through pynvml's wrapper
        otherwise (the simulator, or a library without the function). ABSENT: the call failed."""
        if not asked.count:
            return ()
        nvml = self._nvml
        functions = nvml.functions
        fn = None if functions is None else functions.get(_FIELD_VALUES_FN)
        if fn is None or asked.request is None:
            return nvml.call(scope, _FIELD_VALUES, _FIELD_VALUES_FN, handle, asked.ids)
        if not nvml.supported(scope, _FIELD_VALUES):
            return ABSENT
        ret = asked.request.call(fn, handle)
        if ret != _SUCCESS:
            return nvml.code_failed(scope, _FIELD_VALUES, _FIELD_VALUES_FN, ret)
        return asked.request.array

    def ask(self, scope: str, handle: Any, specs: tuple[FieldSpec, ...]) -> list[Any] | None:
        """The numbers of ``specs`` (no dedicated calls) in a call of their own; None: the call failed."""
        key = (scope, specs)
        asked = self._own.get(key)
        if asked is None or asked.generation != self._nvml.generation:
            if asked is None and len(self._own) >= _OWN_KEPT:  # a new list beyond the usual few per GPU
                self._own.clear()
            asked = self._own[key] = self._build(scope, specs)
        got = self.fetch(scope, handle, asked)
        if got is None:
            return None
        numbers, failed, _ = got
        for error in failed.values():
            self._nvml.errors.append(error)
        index = asked.index
        return [numbers[index.get(s.request, asked.count)] for s in specs]

    def when_changed(
        self, scope: str, handle: Any, key: str, token: Any, specs: tuple[FieldSpec, ...]
    ) -> list[Any]:
        kept = self._kept.get((scope, key))
        if kept is not None and kept[0] == token:
            return kept[1]
        numbers = self.ask(scope, handle, specs)
        if numbers is None:
            self._kept.pop((scope, key), None)
            return [None] * len(specs)
        self._kept[(scope, key)] = (token, numbers)
        return numbers

    def any_asked(self, scope: str, key: str, specs: tuple[FieldSpec, ...]) -> bool:
        """Whether any of ``specs`` (or of their fallback fields) is still asked on ``scope``: False once
        the driver answered all of them NOT_SUPPORTED (kept with the request: until the not-supported
        set changes)."""
        asked = self.request(scope)
        got = asked.any.get(key)
        if got is None:
            got = asked.any[key] = bool(self.askable(scope, specs))
        return got

    def forget(self, scope: str) -> None:
        """Drop what is kept for ``scope`` (a device gone or looked up again)."""
        self._asked.pop(scope, None)
        self._by_call.pop(scope, None)
        for key in [k for k in self._kept if k[0] == scope]:
            del self._kept[key]
        for own in [k for k in self._own if k[0] == scope]:
            del self._own[own]


_OWN_KEPT: Final = 256
"""Field lists kept for the calls of their own (a few per GPU: the per-link NVLink errors); more and
they are all built anew."""


class FieldBatch:
    """One device's field values in one cycle, fetched on first use (by the reader that first asks:
    the call's error, if any, is that reader's)."""

    __slots__ = ("_asked", "_calls", "_failed", "_handle", "_numbers", "_owner", "_scope")

    def __init__(self, owner: FieldValues, scope: str, handle: Any) -> None:
        self._owner = owner
        self._scope = scope
        self._handle = handle
        self._asked: _Request | None = None
        self._numbers: list[Any] = []
        """The answer's numbers in request order, then one None (every field None where the call is
        unavailable)."""
        self._failed: dict[int, str] = {}
        """The error of each field that failed, by position (reported to the reader that takes it)."""
        self._calls: dict[Call, Any] = {}
        """This cycle's answers of dedicated calls (fields that share one make it once)."""

    def _fetch(self) -> _Request:
        owner = self._owner
        asked = owner.request(self._scope)
        got = owner.fetch(self._scope, self._handle, asked)
        if got is not None and got[2]:  # a sum newly refused: its parts in this cycle too (asked once)
            asked = owner.request(self._scope)
            got = owner.fetch(self._scope, self._handle, asked)
        if got is None:  # the call is unavailable: every field by its own call, none from the batch
            by_call = {s.name for s in owner.specs if s.call is not None}
            asked = _Request(asked.generation, [], asked.parts, by_call, direct=False)
            got = ([None], {}, False)
        self._numbers, self._failed, _ = got
        self._asked = asked
        return asked

    def values(self, group: FieldGroup) -> tuple[Any, ...]:
        """Each field of ``group``, in its order: its number (an exact int, or a float where NVML answers
        one); the answer of its dedicated call where the batch cannot give it; None where there is
        none (not supported, no value this cycle, or failed: that error counted against the caller)."""
        asked = self._asked
        if asked is None:
            asked = self._fetch()
        plan = asked.plans.get(group)
        if plan is None:
            plan = asked.plan(group)
        got = plan.take(self._numbers)
        if not plan.calls and not self._failed:
            return got  # type: ignore[no-any-return]
        return self._unusual(asked, group, list(got), plan)

    def _unusual(self, asked: _Request, group: FieldGroup, got: list[Any], plan: _Plan) -> tuple[Any, ...]:
        """:meth:`values` with failed fields reported and dedicated calls made."""
        if self._failed:
            errors = self._owner._nvml.errors
            for spec in group.specs:
                at = asked.index.get(spec.request)
                if at is not None and at in self._failed:
                    errors.append(self._failed.pop(at))
        for i, spec in plan.calls:
            got[i] = self._by_call(spec)
        return tuple(got)

    def _by_call(self, spec: FieldSpec) -> Any:
        call = spec.call
        assert call is not None
        answer = self._calls.get(call, _NOT_ASKED)
        if answer is _NOT_ASKED:
            nvml = self._owner._nvml
            answer = self._calls[call] = nvml.call(self._scope, call.key, call.fn, self._handle, *call.args)
        if answer is ABSENT:
            return None
        member = spec.member
        return answer if member is None else member(answer) if callable(member) else answer[member]

    def supported(self, spec: FieldSpec) -> bool:
        """False once the driver answered ``spec`` NOT_SUPPORTED (its fallback fields are asked instead)."""
        return self._owner._nvml.supported(self._scope, spec.name)

    def parts_asked(self, spec: FieldSpec) -> bool:
        """True where ``spec`` is not supported and (some of) its fallback fields are asked instead."""
        return spec.name in self._owner.request(self._scope).parts

    def any_asked(self, key: str, specs: tuple[FieldSpec, ...]) -> bool:
        """False once every one of ``specs`` and of their fallback fields is known not supported here
        (``key`` names the group: the answer is kept with the device's request)."""
        return self._owner.any_asked(self._scope, key, specs)

    def ask(self, specs: tuple[FieldSpec, ...]) -> list[Any] | None:
        """The numbers of ``specs`` (fields outside the batch, none with a dedicated call) in a call of
        their own, now; None: the call failed."""
        return self._owner.ask(self._scope, self._handle, specs)

    def when_changed(self, key: str, token: Any, specs: tuple[FieldSpec, ...]) -> list[Any]:
        """The numbers of ``specs``, asked in a call of their own only when ``token`` differs from the
        one they were last asked under (the per-link NVLink errors, when an error total moved), else
        the numbers kept from then: the counters they sum cannot have moved either."""
        return self._owner.when_changed(self._scope, self._handle, key, token, specs)


_NOT_ASKED: Final = object()
