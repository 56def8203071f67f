"""PCIe and NVLink traffic counters and NVLink error counters, from the batched field values.

All of them are fields of the device's one ``nvmlDeviceGetFieldValues`` call
(:data:`~falcon_gpu.sources.nvml.field_values.PCIE_TRAFFIC`, ``NVLINK``): PCIe bytes
(``NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES``), per link the data throughput
(``..._NVLINK_THROUGHPUT_DATA_TX/RX`` with the link as ``scopeId``, KiB -> bytes, summed over the
links) and the CRC flit, CRC data, replay and recovery error counters (``..._ERROR_COUNT_L<n>``,
links 0-11), summed over the links and kept per link for the links that counted any. A GPU without
NVLink answers NOT_SUPPORTED once and is not asked again. The per-second rates
(:class:`~falcon_gpu.sources.nvml.rates.CounterRates`) are absent on the first cycle and over a
counter reset.

Written for the hot path: 84 NVLink values per GPU per cycle, read as one list and sliced; per-link
readings are built only in the rare case that a link has counted an error.
"""

from __future__ import annotations

from falcon_gpu.model.snapshot import NvlinkErrors, NvlinkReading
from falcon_gpu.sources.nvml.field_values import NVLINK, NVLINK_ERROR_LINKS, NVLINK_LINKS, PCIE_TRAFFIC
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

KIB = 1024
_ERRORS_AT = 2 * NVLINK_LINKS
"""Where the error counters start in the NVLINK values (after TX and RX of every link)."""


def _sum(values: list[float | None]) -> int | None:
    known = [v for v in values if v is not None]
    return int(sum(known)) if known else None


def _per_link(errors: list[list[float | None]]) -> tuple[NvlinkReading, ...]:
    """The links with a non-zero error counter (``errors``: per kind, per link)."""
    links = []
    for link, counts in enumerate(zip(*errors, strict=True)):
        if any(counts):
            links.append(NvlinkReading(link, NvlinkErrors(*(None if c is None else int(c) for c in counts))))
    return tuple(links)


def read_interconnect(ctx: DeviceContext) -> Fields:
    batch, rates, now, scope = ctx.field_values, ctx.rates, ctx.timestamp, ctx.scope
    tx, rx = (None if v is None else int(v) for v in batch.numbers(PCIE_TRAFFIC))
    out: Fields = {
        "pcie_tx_bytes": tx,
        "pcie_rx_bytes": rx,
        "pcie_tx_bytes_per_second": rates.rate(scope, "pcie_tx", tx, now),
        "pcie_rx_bytes_per_second": rates.rate(scope, "pcie_rx", rx, now),
    }
    values = batch.numbers(NVLINK)
    link_tx, link_rx = _sum(values[:NVLINK_LINKS]), _sum(values[NVLINK_LINKS:_ERRORS_AT])
    if link_tx is not None or link_rx is not None:
        out["nvlink_tx_bytes"] = None if link_tx is None else link_tx * KIB
        out["nvlink_rx_bytes"] = None if link_rx is None else link_rx * KIB
        out["nvlink_tx_bytes_per_second"] = rates.rate(scope, "nvlink_tx", out["nvlink_tx_bytes"], now)
        out["nvlink_rx_bytes_per_second"] = rates.rate(scope, "nvlink_rx", out["nvlink_rx_bytes"], now)
    errors = values[_ERRORS_AT:]
    if any(v is not None for v in errors):
        per_kind = [errors[i : i + NVLINK_ERROR_LINKS] for i in range(0, len(errors), NVLINK_ERROR_LINKS)]
        out["nvlink_errors"] = NvlinkErrors(*(_sum(kind) for kind in per_kind))
        out["nvlink"] = _per_link(per_kind) if any(errors) else ()
    return out
