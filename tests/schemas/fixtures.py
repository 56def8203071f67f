"""Hand-built cycles for schema tests: every field set, so every series must appear."""

from __future__ import annotations

from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage, ProcessUsage, UnattributedUsage
from falcon_gpu.model.cycle import CycleData, HealthReport
from falcon_gpu.model.snapshot import (
    DeviceReading,
    EccCounts,
    GpmReading,
    MigReading,
    NvlinkErrors,
    NvlinkReading,
    ProcessReading,
    RemappedRows,
    RetiredPages,
    Snapshot,
)
from falcon_gpu.model.telemetry import Telemetry

GIB = 1 << 30
TS = 1_700_000_000.5
MIB_S = 1 << 20
"""One MiB per second (Open-Falcon's Rx/Tx unit)."""
GPM = GpmReading(0.63, 0.41, 0.22, 0.35, 0.7, 0.0, 0.3, 0.12)
INSTANCE_GPM = GpmReading(sm_active=0.8, sm_occupancy=0.5, tensor_active=0.25, dram_active=0.1)


def full_device(index: int = 0, uuid: str = "GPU-aaaa") -> DeviceReading:
    return DeviceReading(
        index=index,
        uuid=uuid,
        name="NVIDIA H100 80GB HBM3",
        pci_bus_id="00000000:18:00.0",
        memory_total_bytes=80 * GIB,
        memory_used_bytes=20 * GIB,
        memory_free_bytes=60 * GIB,
        memory_reserved_bytes=GIB // 2,
        utilization_ratio=0.73,
        memory_utilization_ratio=0.4,
        temperature_celsius=61,
        memory_temperature_celsius=70,
        power_watts=350.5,
        power_limit_watts=700,
        energy_joules=1350.5,
        performance_state=0,
        sm_clock_hertz=1980e6,
        memory_clock_hertz=2619e6,
        fan_speed_ratio=0.3,
        encoder_utilization_ratio=0.0,
        decoder_utilization_ratio=0.05,
        pcie_replays=2,
        ecc=EccCounts(0, 0, 3, 1),
        retired_pages=RetiredPages(1, 2, True),
        remapped_rows=RemappedRows(4, 0, True, False),
        clock_event_reasons=frozenset({"sw_power_cap"}),
        inforom_valid=True,
        processes=(ProcessReading(pid=4242, name="python", used_memory_bytes=20 * GIB, sm_util_ratio=0.55),),
        xid_counts={79: 1},
        gpm=GPM,
        pcie_tx_bytes=4_000_000_000,
        pcie_rx_bytes=9_000_000_000,
        pcie_tx_bytes_per_second=3 * MIB_S,
        pcie_rx_bytes_per_second=5 * MIB_S,
        nvlink_tx_bytes=20_000_000_000,
        nvlink_rx_bytes=10_000_000_000,
        nvlink_tx_bytes_per_second=7 * MIB_S,
        nvlink_rx_bytes_per_second=11 * MIB_S,
        nvlink_errors=NvlinkErrors(crc_flit=3, crc_data=0, replay=2, recovery=0),
        nvlink=(NvlinkReading(2, NvlinkErrors(crc_flit=3, crc_data=0, replay=2, recovery=0)),),
    )


def mig_device() -> DeviceReading:
    return DeviceReading(
        index=1,
        uuid="GPU-bbbb",
        name="NVIDIA A100-SXM4-40GB",
        pci_bus_id="00000000:3b:00.0",
        memory_total_bytes=40 * GIB,
        memory_used_bytes=2 * GIB,
        mig_enabled=True,
        mig=(
            MigReading(
                1,
                0,
                "1g.5gb",
                "MIG-1111",
                memory_total_bytes=5 * GIB,
                memory_used_bytes=GIB,
                gpm=INSTANCE_GPM,
            ),
        ),
    )


def lost_device() -> DeviceReading:
    return DeviceReading(
        index=2,
        uuid="GPU-cccc",
        name="NVIDIA L4",
        pci_bus_id="00000000:5e:00.0",
        up=False,
        error="GPU is lost",
    )


TRAIN = ContainerRef("ml", "train-0", "main", labels=(("label_team", "vision"),))
INFER = ContainerRef("serve", "infer-7", "server")


def cycle(process_metrics: bool = False) -> CycleData:
    snap = Snapshot(
        timestamp=TS,
        nvml_ok=True,
        driver_version="550.54.15",
        cuda_version="12.4",
        devices=(full_device(), mig_device(), lost_device()),
    )
    att = Attribution(
        pods=(
            PodUsage(
                TRAIN,
                "GPU-aaaa",
                resource="nvidia.com/gpu",
                allocated=True,
                memory_used_bytes=20 * GIB,
                utilization_ratio=0.55,
                processes=1,
                energy_joules_total=12.5,
            ),
            PodUsage(
                INFER,
                "GPU-bbbb",
                "MIG-1111",
                resource="nvidia.com/mig-1g.5gb",
                allocated=True,
                allocation_idle_seconds=90.0,
            ),
        ),
        unattributed=(
            UnattributedUsage(
                "GPU-aaaa", memory_used_bytes=GIB, utilization_ratio=0.05, energy_joules_total=7.5
            ),
        ),
        processes=(
            ProcessUsage(
                4242,
                "python",
                "GPU-aaaa",
                memory_used_bytes=20 * GIB,
                utilization_ratio=0.55,
                container=TRAIN,
            ),
        ),
    )
    health = {
        "GPU-aaaa": HealthReport({"ecc": 0, "xid": 2, "lost": 0}, {79: 1}, last_xid=79),
        "GPU-bbbb": HealthReport({"lost": 0}),
        "GPU-cccc": HealthReport({"lost": 2}),
    }
    tel = Telemetry()
    tel.cycle_done(0.0123)
    tel.error("gpu")
    tel.samples("stdout", "sent", 10)
    return CycleData("node-a", 30, snap, att, health, tel.view(), process_metrics=process_metrics)
