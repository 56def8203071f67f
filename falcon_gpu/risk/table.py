"""Every reason a GPU is at risk, declared once: the rules and ``doctor`` both read this table.

A reason's *input* is a number per GPU (errors in the last hour, pages retired, a 0/1 flag, the
share of the hour spent throttled); its part of the score is ``weight * min(input / full, 1)``;
the score is the sum of the parts, capped at 1. A sum rather than a maximum because independent
signs of wear add up (a GPU with climbing ECC *and* recurring XIDs is worse than either); a cap
rather than a normalisation so that one decisive reason (a failed row remap, weight 1) makes a
drain candidate on its own, however healthy the rest looks.

Why these kinds and weights (NVIDIA's GPU memory error management and XID guidance): a failed
row remap means the bank has no spare rows left (the GPU must be replaced); pending remaps and
page retirements need a reset; retired pages near 60 is NVIDIA's RMA line; correctable ECC
errors that keep coming, XIDs 48/63/64/74/79/92/94/95 that recur, and rising NVLink or PCIe
replays are the trends that precede an uncorrectable error or a GPU falling off the bus; time
spent thermally throttled or power-braked wears a board and points at cooling or power.
"""

from __future__ import annotations

from dataclasses import dataclass

from falcon_gpu.health.evaluator import RETIRED_PAGES_RMA

PRECURSOR_XIDS = (48, 63, 64, 74, 79, 92, 94, 95)
"""XIDs that come before a GPU fails (double-bit ECC, row remap events, NVLink, off the bus,
high single-bit rate, contained/uncontained ECC)."""

THROTTLE_REASONS = ("hw_thermal", "sw_thermal", "hw_power_brake")
"""Clock event reasons that count as thermally or power-brake throttled."""

GPU = "cluster, node, gpu, uuid, model"
"""The labels a risk series carries: one per physical GPU, whatever path delivered it."""

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class Reason:
    """One reason: ``name`` is its ``reason`` label; ``expr`` the PromQL of its input per GPU
    (collapsed with ``max by (GPU)`` so two delivery paths count once); ``window`` the seconds of
    history a trend looks at (0: a level, read now)."""

    name: str
    weight: float
    full: float
    window: float
    expr: str
    help: str


def _increase(selector: str, window: str) -> str:
    return f"sum by ({GPU}) (max by ({GPU}, link, type, scope) (increase({selector}[{window}])))"


_XID = 'falcon_gpu_xid_errors_total{xid=~"' + "|".join(str(x) for x in PRECURSOR_XIDS) + '"}'
_THROTTLED = 'falcon_gpu_clock_event_active{reason=~"' + "|".join(THROTTLE_REASONS) + '"}'

REASONS: tuple[Reason, ...] = (
    Reason(
        "row_remap_failure", 1.0, 1, 0,
        f"max by ({GPU}) (falcon_gpu_remapped_rows_failed)",
        "a row remap failed: the memory bank has no spare rows left; replace the GPU",
    ),
    Reason(
        "ecc_corrected_rate", 0.5, 10, HOUR,
        _increase('falcon_gpu_ecc_errors_total{type="corrected", scope="volatile"}', "1h"),
        "correctable ECC errors keep coming (full at 10 in the last hour)",
    ),
    Reason(
        "xid_recurring", 0.5, 3, DAY,
        f"sum by ({GPU}) (clamp_min((max by ({GPU}, xid) ({_XID}) - max by ({GPU}, xid) ({_XID} offset 1d))"
        f" or max by ({GPU}, xid) ({_XID}), 0))",
        "XIDs that precede a failure (48, 63, 64, 74, 79, 92, 94, 95) in the last day (full at 3)",
    ),
    Reason(
        "retired_pages", 0.4, RETIRED_PAGES_RMA, 0,
        f"max by ({GPU}) (sum without (cause) (falcon_gpu_retired_pages))",
        f"retired pages, against NVIDIA's RMA line of {RETIRED_PAGES_RMA}",
    ),
    Reason(
        "retired_pages_pending", 0.3, 1, 0,
        f"max by ({GPU}) (falcon_gpu_retired_pages_pending)",
        "a page retirement waits for a GPU reset",
    ),
    Reason(
        "row_remap_pending", 0.3, 1, 0,
        f"max by ({GPU}) (falcon_gpu_remapped_rows_pending)",
        "a row remap waits for a GPU reset",
    ),
    Reason(
        "nvlink_error_rate", 0.3, 100, HOUR,
        _increase("falcon_gpu_nvlink_errors_total", "1h"),
        "NVLink CRC, replay and recovery errors (full at 100 in the last hour)",
    ),
    Reason(
        "pcie_replay_rate", 0.2, 100, HOUR,
        _increase("falcon_gpu_pcie_replays_total", "1h"),
        "PCIe replays (full at 100 in the last hour)",
    ),
    Reason(
        "throttled", 0.3, 1, HOUR,
        f"sum_over_time((max by ({GPU}) ({_THROTTLED}) > bool 0)[1h:1m])"
        " / scalar(count_over_time(vector(1)[1h:1m]))",
        "share of the last hour thermally throttled or power-braked (sampled each minute)",
    ),
)  # fmt: skip

DRAIN_AT = 0.8
"""The score at which the alert names a GPU a drain candidate."""
