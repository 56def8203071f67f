"""The ``[metrics] profile`` setting: which families a schema emits when no ``include`` says otherwise.

``full`` is every family, each as dense as it always was. ``default`` is a lean set, sized so that a
healthy GPU costs at most 30 device-level series in the ``falcon_gpu`` schema (8 H100s on the NVML
mock: 24 a GPU, 29 with GPM and PCIe counters) while every shipped dashboard panel, recording rule
and alert still answers:

- ``falcon_gpu``: the families of :data:`FALCON_GPU_FULL_ONLY` are left out (emitted on request,
  through ``include``), and the families of :data:`SPARSE` have a series only while it is not 0: a
  health check only while it is not *pass*, a clock-event reason only while active, a fabric fault
  only while it holds, an ECC counter, retired-page or remapped-row series only once it counts one.
  ``falcon_gpu_health_worst`` (the worst check per GPU: 0 pass, 1 warn, 2 fail) is always there
  instead, so "is this GPU healthy" never needs an absent series. docs/METRICS.md says what a query
  writes to read both profiles alike.
- ``dcgm``: the ``DCGM_FI_*`` families of dcgm-exporter's default counter list
  (:data:`DCGM_EXPORTER_DEFAULT`); the ``falcon_gpu_*`` families it carries follow the ``falcon_gpu``
  default. dcgm-exporter's series are dense, so these are too.
- ``nvidia_smi`` and Open-Falcon: no lean set (the dashboards and strategies of the exporters they
  copy read every family): the default is their full set.

How ``include`` combines: under ``default`` it adds families to the lean set (the rest on request);
under ``full`` (and in a schema with no lean set) it keeps only what it names, as it always did.
``exclude`` then drops (:mod:`falcon_gpu.schemas.selection`).
"""

from __future__ import annotations

from typing import Final, Literal

Profile = Literal["default", "full"]
PROFILES: Final = ("default", "full")

FALCON_GPU_FULL_ONLY: Final = frozenset(
    {
        "falcon_gpu_memory_reserved_bytes",
        "falcon_gpu_slowdown_tlimit_celsius",
        "falcon_gpu_shutdown_tlimit_celsius",
        "falcon_gpu_performance_state",
        "falcon_gpu_fan_speed_ratio",
        "falcon_gpu_encoder_utilization_ratio",
        "falcon_gpu_decoder_utilization_ratio",
        "falcon_gpu_sm_occupancy_ratio",
        "falcon_gpu_graphics_active_ratio",
        "falcon_gpu_fp64_active_ratio",
        "falcon_gpu_fp32_active_ratio",
        "falcon_gpu_fp16_active_ratio",
        "falcon_gpu_fabric_info",
        "falcon_gpu_fabric_health_mask",
    }
)
"""``falcon_gpu`` families the default profile leaves out: no shipped panel, rule or alert reads them."""

SPARSE: Final = frozenset(
    {
        "falcon_gpu_health",
        "falcon_gpu_clock_event_active",
        "falcon_gpu_fabric_fault",
        "falcon_gpu_ecc_errors_total",
        "falcon_gpu_retired_pages",
        "falcon_gpu_retired_pages_pending",
        "falcon_gpu_remapped_rows",
        "falcon_gpu_remapped_rows_pending",
        "falcon_gpu_remapped_rows_failed",
    }
)
"""``falcon_gpu`` families that, in the default profile, have a series only while it is not 0."""

DEFAULT_ONLY: Final = frozenset({"falcon_gpu_health_worst"})
"""The summary the default profile adds for its sparse health checks (``full`` has every check)."""

DCGM_EXPORTER_DEFAULT: Final = (
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
)  # fmt: skip
"""The 21 uncommented ``DCGM_FI_DEV_*`` fields of dcgm-exporter's ``etc/default-counters.csv``
(NVIDIA/dcgm-exporter, commit b54068a9). This schema has no ``PCIE_TX/RX_THROUGHPUT`` (its PCIe traffic
is ``DCGM_FI_PROF_PCIE_*_BYTES``) nor ``VGPU_LICENSE_STATUS``: 18 of them have a series."""

DCGM_EXPORTER_DEFAULT_PROF: Final = (
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
)  # fmt: skip
"""The "DCP metrics" that dcgm-exporter 3.x/4.x releases list uncommented at the end of the same file
(26 fields in all): profiling fields, on Hopper and later through GPM here. NVIDIA's own dashboard reads
two of them (``GR_ENGINE_ACTIVE``, ``PIPE_TENSOR_ACTIVE``)."""


def lean_set(names: tuple[str, ...]) -> frozenset[str]:
    """The families of one schema's ``names`` that the default profile emits (``falcon_gpu``, ``dcgm``)."""
    dcgm = frozenset(DCGM_EXPORTER_DEFAULT + DCGM_EXPORTER_DEFAULT_PROF)
    return frozenset(
        name
        for name in names
        if name not in FALCON_GPU_FULL_ONLY and (not name.startswith("DCGM_FI_") or name in dcgm)
    )
