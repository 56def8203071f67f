"""PCIe and NVLink traffic counters and NVLink error counters, from the batched field values.

All of them are fields of the device's one ``nvmlDeviceGetFieldValues`` call
(:data:`~falcon_gpu.sources.nvml.field_values.PCIE_TRAFFIC`, ``NVLINK``): PCIe bytes
(``NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES``), per link the data throughput (``..._NVLINK_THROUGHPUT_DATA_TX/RX``
with the link as ``scopeId``, KiB -> bytes) and the CRC flit, CRC data, replay and recovery error
counters (``..._ERROR_COUNT_L<n>``, links 0-11). A link that answers nothing is left out; a GPU
without NVLink answers NOT_SUPPORTED once and is not asked again. The per-second rates
(:class:`~falcon_gpu.sources.nvml.rates.CounterRates`) are absent on the first cycle and over a
counter reset.
"""

from __future__ import annotations

from falcon_gpu.model.snapshot import NvlinkReading
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import NVLINK, PCIE_TRAFFIC, FieldSpec
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

KIB = 1024


def _counter(ctx: DeviceContext, spec: FieldSpec, scale: int = 1) -> int | None:
    value = ctx.field_values.value(ctx.nvml, spec)
    return None if value is ABSENT else int(value) * scale


def _link(ctx: DeviceContext, link: int, specs: tuple[FieldSpec, ...]) -> NvlinkReading | None:
    tx, rx = (_counter(ctx, s, KIB) for s in specs[:2])
    errors = [_counter(ctx, s) for s in specs[2:]] or [None] * 4
    if tx is None and rx is None and all(e is None for e in errors):
        return None
    return NvlinkReading(link, tx, rx, *errors)


def read_interconnect(ctx: DeviceContext) -> Fields:
    tx, rx = (_counter(ctx, s) for s in PCIE_TRAFFIC)
    links = tuple(r for link, specs in enumerate(NVLINK) if (r := _link(ctx, link, specs)) is not None)
    rates, now, scope = ctx.rates, ctx.timestamp, ctx.scope
    out: Fields = {
        "pcie_tx_bytes": tx,
        "pcie_rx_bytes": rx,
        "pcie_tx_bytes_per_second": rates.rate(scope, "pcie_tx", tx, now),
        "pcie_rx_bytes_per_second": rates.rate(scope, "pcie_rx", rx, now),
        "nvlink": links,
    }
    if links:
        link_tx = [r.tx_bytes for r in links if r.tx_bytes is not None]
        link_rx = [r.rx_bytes for r in links if r.rx_bytes is not None]
        out["nvlink_tx_bytes_per_second"] = rates.rate(scope, "nvlink_tx", sum(link_tx) if link_tx else None, now)
        out["nvlink_rx_bytes_per_second"] = rates.rate(scope, "nvlink_rx", sum(link_rx) if link_rx else None, now)
    return out
