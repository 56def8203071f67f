"""PCIe and NVLink traffic counters and NVLink error counters.

The counters of every cycle are fields of the device's one ``nvmlDeviceGetFieldValues`` call
(:data:`~falcon_gpu.sources.nvml.field_values.PCIE_TRAFFIC`, ``NVLINK``): PCIe bytes
(``NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES``); NVLink data sent and received over all links
(``..._NVLINK_THROUGHPUT_DATA_TX/RX`` with ``scopeId = UINT_MAX``, which nvml.h defines as the sum
across all links; KiB -> bytes) and the older CRC flit, CRC data, replay and recovery error counters as
totals over the links (``..._ERROR_COUNT_TOTAL``): eight values per GPU and cycle.

NVLink readings exist only for a GPU with a link up (:func:`~.nvlink_links.active_links`, once a
minute): a GPU without an active link has none, whatever its NVLink fields answer (NVIDIA's mock answers
a T4's SUCCESS 0). The errors per link come first from the data-link fields of the active links
(:func:`~.nvlink_links.dl_errors`: CRC -> crc_flit, replay, recovery; all 18 links; read with the slow
readings, again as soon as an older total moved). A kind with no DL field on the GPU (the data CRC count
always; all four on a driver without the DL fields) comes from the older fields: the per-link counters
(``..._ERROR_COUNT_L<n>``, links 0-11) are asked, in a field-values call of their own, only when that
kind's total changed since they were last asked (so also on the first cycle of a GPU whose totals are
not zero); while the totals stay put the links' counters cannot have moved, and their last answer is
published again. Where a driver answers an aggregate NOT_SUPPORTED or INVALID_ARGUMENT, its per-link
fields are asked instead, in every cycle's batch from that cycle on (18 links per direction for traffic,
12 per error kind); the ones it refuses too are not asked again (no per-field look-ups: the answer
"nothing asked" is kept until the set of fields NVML refused changes, e.g. after a MIG mode change).
The per-second rates (:class:`~falcon_gpu.sources.nvml.rates.CounterRates`) are absent on the first
cycle and over a counter reset.

Cost: a steady cycle takes its eight values in one look-up of the batch and the kept link states and DL
counters in two look-ups of the slow readings; where every NVLink sum was answered and no counter is
above 0 (a healthy GPU on a current driver), nothing else is looked at and the zero totals are one
shared record, which also lets the health check's nvlink comparison stop at identity. The same holds
where the older totals are refused and the DL fields count (a Hopper or later on NVIDIA's mock): no
total above 0 and no link counted, the totals are one record per set of counted kinds
(:data:`_QUIET_TOTALS`), without summing or naming links.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from types import MappingProxyType
from typing import Final

from falcon_gpu.model.snapshot import NvlinkErrors, NvlinkReading
from falcon_gpu.sources.nvml.field_values import (
    NVLINK,
    NVLINK_ERROR_LINKS,
    NVLINK_ERROR_TOTALS,
    NVLINK_ERRORS,
    NVLINK_LINK_ERRORS,
    NVLINK_LINKS,
    NVLINK_RX,
    NVLINK_TRAFFIC,
    NVLINK_TX,
    PCIE_TRAFFIC,
    FieldBatch,
    FieldGroup,
    FieldSpec,
)
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.nvlink_links import (
    DL_KIND_AT,
    NO_DL_ERRORS,
    DlErrors,
    active_links,
    dl_errors,
)

KIB = 1024
_NO_ERRORS: tuple[float | None, ...] = (0.0,) * NVLINK_ERROR_LINKS
"""Every link's counter of a kind whose total is zero."""
_NOT_COUNTED: tuple[float | None, ...] = (None,) * NVLINK_ERROR_LINKS
"""Every link's counter of a kind the GPU does not count (no NVLink)."""
_BEYOND_L11: tuple[float | None, ...] = (None,) * (NVLINK_LINKS - NVLINK_ERROR_LINKS)
"""Links 12-17 in the older fields, which have none for them."""
_TRAFFIC = FieldGroup(NVLINK_TRAFFIC)
_LINKS_TX, _LINKS_RX = FieldGroup(NVLINK_TX), FieldGroup(NVLINK_RX)
_TOTALS = FieldGroup(NVLINK_ERROR_TOTALS)
_KIND_LINKS = tuple(FieldGroup(links) for links in NVLINK_ERRORS)
"""Per error kind: its per-link counters (asked in the batch where the driver refuses the total)."""


def _sum(values: Sequence[float | None]) -> int | None:
    known = [v for v in values if v is not None]
    return int(sum(known)) if known else None


def _kib(value: float | None) -> int | None:
    return None if value is None else int(value) * KIB


def _traffic(batch: FieldBatch) -> tuple[int | None, int | None]:
    """NVLink bytes sent and received over all links: the driver's sums, else the per-link fields'."""
    tx, rx = batch.values(_TRAFFIC)
    tx_spec, rx_spec = NVLINK_TRAFFIC
    return _direction(batch, tx_spec, tx, _LINKS_TX), _direction(batch, rx_spec, rx, _LINKS_RX)


def _direction(batch: FieldBatch, spec: FieldSpec, total: float | None, links: FieldGroup) -> int | None:
    if batch.supported(spec):
        return _kib(total)
    return _kib(_sum(batch.values(links))) if batch.parts_asked(spec) else None


def _per_link(errors: Sequence[Sequence[float | None]]) -> tuple[NvlinkReading, ...]:
    """The links with a non-zero error counter (``errors``: per kind, per link)."""
    links = []
    for link, counts in enumerate(zip(*errors, strict=True)):
        if any(counts):
            links.append(NvlinkReading(link, NvlinkErrors(*(None if c is None else int(c) for c in counts))))
    return tuple(links)


def _errors(
    batch: FieldBatch, dl: DlErrors = NO_DL_ERRORS
) -> tuple[list[int | None], list[Sequence[float | None]]]:
    """Per error kind: the total over the links, and the per-link counters (18 each, index = link). A
    kind the data-link fields count (``dl``) is taken from them; the others from the older fields."""
    covered = [False] * len(NVLINK_ERROR_TOTALS)
    for at, counts in zip(DL_KIND_AT, dl.kinds, strict=True):
        covered[at] = counts is not None
    totals = batch.values(_TOTALS)
    aggregate = [batch.supported(spec) for spec in NVLINK_ERROR_TOTALS]
    per_kind: list[Sequence[float | None]] = [
        _NO_ERRORS if summed or dl_counted  # not summed: the per-link fields are in the batch (if any)
        else batch.values(links) if batch.parts_asked(spec) else _NOT_COUNTED
        for spec, summed, dl_counted, links in zip(NVLINK_ERROR_TOTALS, aggregate, covered, _KIND_LINKS,
                                                   strict=True)
    ]  # fmt: skip
    named = [summed and not dl_counted for summed, dl_counted in zip(aggregate, covered, strict=True)]
    if any(t for t, name in zip(totals, named, strict=True) if name):  # name the links
        asked: tuple[FieldSpec, ...] = (
            NVLINK_LINK_ERRORS
            if all(named)
            else tuple(
                spec for name, links in zip(named, NVLINK_ERRORS, strict=True) if name for spec in links
            )
        )
        numbers = batch.when_changed("nvlink_links", (tuple(named), tuple(totals)), asked)
        at = 0
        for kind, name in enumerate(named):
            if name:
                per_kind[kind] = numbers[at : at + NVLINK_ERROR_LINKS]
                at += NVLINK_ERROR_LINKS
    out = [
        (None if total is None else int(total)) if summed else _sum(links)
        for total, summed, links in zip(totals, aggregate, per_kind, strict=True)
    ]
    per_kind = [(*links, *_BEYOND_L11) for links in per_kind]
    for at, counts in zip(DL_KIND_AT, dl.kinds, strict=True):
        if counts is not None:
            per_kind[at] = list(counts)
            out[at] = _sum(per_kind[at])
    return out, per_kind


_AGGREGATES: tuple[FieldSpec, ...] = PCIE_TRAFFIC + NVLINK_TRAFFIC + NVLINK_ERROR_TOTALS
"""The eight values of a steady cycle (PCIe TX/RX, NVLink TX/RX, the four error totals), taken in one
look-up of the batch (:data:`_AGGREGATE_GROUP`)."""
_AGGREGATE_GROUP = FieldGroup(_AGGREGATES)
"""A sum the device is not asked (no NVLink, or its per-link fields asked instead) is None in it."""
_ZERO_ERRORS = NvlinkErrors(0, 0, 0, 0)
"""Shared by every cycle of every GPU whose links counted no error (a record is never changed)."""


_QUIET_TOTALS: Final = MappingProxyType(
    {
        kinds: _ZERO_ERRORS if None not in kinds else NvlinkErrors(*kinds)
        for kinds in product((0, None), repeat=len(NVLINK_ERROR_TOTALS))
    }
)
"""The error totals of a GPU whose counters are all zero where they are counted: one shared record per
combination of the kinds it counts (a constant table, built at import), as :data:`_ZERO_ERRORS` is."""


def _quiet_totals(
    batch: FieldBatch, totals: Sequence[float | None], dl: DlErrors
) -> tuple[int | None, ...] | None:
    """The error totals of a cycle in which no counter is above zero (``totals``: the older fields' of
    this cycle, none above zero; ``dl``: no link counted), per kind 0 where something counts it and None
    where nothing does, as :func:`_errors` would sum them; None where a kind's per-link fields are asked
    in place of its total (:func:`_errors` reads them)."""
    out: list[int | None] = []
    for spec, total in zip(NVLINK_ERROR_TOTALS, totals, strict=True):
        if total is not None:
            out.append(0)
        elif batch.parts_asked(spec):
            return None
        else:
            out.append(None)
    for at, counts in zip(DL_KIND_AT, dl.kinds, strict=True):
        if counts is not None:
            out[at] = 0 if any(c is not None for c in counts) else None
    return tuple(out)


_Links = tuple[int | None, int | None, list[int | None], list[Sequence[float | None]]]
"""NVLink bytes sent and received, the error totals per kind, and the per-link error counters."""


def _nvlink(batch: FieldBatch, values: Sequence[float | None], dl: DlErrors) -> _Links:
    """The NVLink readings of a GPU that has NVLink (``values``: this cycle's :data:`_AGGREGATES`;
    ``dl``: the data-link error counters, :func:`dl_errors`)."""
    if None in values[2:4]:  # a sum refused (an older driver: per-link fields in the batch) or unanswered
        return (*_traffic(batch), *_errors(batch, dl))
    tx, rx = values[2:4]
    return (int(tx) * KIB, int(rx) * KIB, *_errors(batch, dl))  # type: ignore[arg-type]


def _put_traffic(ctx: DeviceContext, out: Fields, sent: int | None, received: int | None) -> None:
    """NVLink bytes sent and received over all links, and their rates."""
    rates, scope, now = ctx.rates, ctx.scope, ctx.timestamp
    out["nvlink_tx_bytes"] = sent
    out["nvlink_rx_bytes"] = received
    out["nvlink_tx_bytes_per_second"], out["nvlink_rx_bytes_per_second"] = rates.pair(
        scope, "nvlink", sent, received, now
    )


def read_interconnect(ctx: DeviceContext) -> Fields:
    batch, rates, now, scope = ctx.field_values, ctx.rates, ctx.timestamp, ctx.scope
    values = batch.values(_AGGREGATE_GROUP)
    pcie_tx, pcie_rx, sum_tx, sum_rx, crc_flit, crc_data, replay, recovery = values
    tx = None if pcie_tx is None else int(pcie_tx)
    rx = None if pcie_rx is None else int(pcie_rx)
    out: Fields = {
        "pcie_tx_bytes": tx,
        "pcie_rx_bytes": rx,
    }
    out["pcie_tx_bytes_per_second"], out["pcie_rx_bytes_per_second"] = rates.pair(scope, "pcie", tx, rx, now)
    links = active_links(ctx)
    if not links:  # no NVLink, or none of its links up: no NVLink readings at all
        return out
    dl = dl_errors(ctx, links, values[4:])
    if None not in values and not (crc_flit or crc_data or replay or recovery or dl.counted):
        # the usual: every value answered, every NVLink sum among them, and no link counted an error
        _put_traffic(ctx, out, int(sum_tx) * KIB, int(sum_rx) * KIB)  # type: ignore[arg-type]
        out["nvlink_errors"] = _ZERO_ERRORS
        out["nvlink"] = ()
        return out
    if None not in values[2:4] and not (crc_flit or crc_data or replay or recovery or dl.counted):
        # a GPU whose older totals are partly refused (a Hopper or later counting on the DL fields):
        # no counter moved, so nothing per link to name
        quiet = _quiet_totals(batch, values[4:], dl)
        if quiet is not None:
            _put_traffic(ctx, out, int(sum_tx) * KIB, int(sum_rx) * KIB)  # type: ignore[arg-type]
            if any(t is not None for t in quiet):
                out["nvlink_errors"] = _QUIET_TOTALS[quiet]
                out["nvlink"] = ()
            return out
    if None in values[2:] and not any(dl.kinds) and not batch.any_asked("nvlink", NVLINK):  # no NVLink
        return out  # field on this GPU (all refused): nothing to read
    link_tx, link_rx, totals, per_kind = _nvlink(batch, values, dl)
    if link_tx is not None or link_rx is not None:
        _put_traffic(ctx, out, link_tx, link_rx)
    if any(totals):
        out["nvlink_errors"] = NvlinkErrors(*totals)
        out["nvlink"] = _per_link(per_kind)
    elif any(t is not None for t in totals):
        out["nvlink_errors"] = _ZERO_ERRORS if None not in totals else NvlinkErrors(*totals)
        out["nvlink"] = ()
    return out
