"""The scalar per-device readings: one entry each, in the order the schemas publish them.

Structured readings (processes, ECC groups, retired pages, remapped rows, clock event
reasons, MIG, GPM, per-link NVLink) are written by hand in their reader, simulator and
schema modules, with their units from :mod:`falcon_gpu.readings.units`.

``BOARD`` are the GPU's own readings, ``INTERCONNECT`` its PCIe and NVLink traffic; the
``falcon_gpu`` schema publishes its structured health series between the two.
"""

from __future__ import annotations

from typing import Final

import pynvml

from falcon_gpu.readings.spec import SETTING, SINT, UINT, Nvml, Publish, Reading, Refresh, Simulated
from falcon_gpu.readings.units import (
    BYTES,
    BYTES_PER_SECOND,
    CELSIUS,
    HERTZ,
    JOULES,
    MEGAHERTZ,
    MIB,
    MIB_PER_SECOND,
    MILLIJOULES,
    MILLIWATTS,
    NUMBER,
    PERCENT,
    RATIO,
    WATTS,
)

P = "falcon_gpu_"
D = "DCGM_FI_DEV_"
PROF = "DCGM_FI_PROF_"
N = "nvidia_smi_"
_MEMORY = "nvmlDeviceGetMemoryInfo"
_UTIL = "nvmlDeviceGetUtilizationRates"
_CLOCK = "nvmlDeviceGetClockInfo"
_PCIE_TX = getattr(pynvml, "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197)
_PCIE_RX = getattr(pynvml, "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198)


def _engine(fn: str, engine: str) -> Nvml:
    """A video engine's utilisation (percent, the answer's first member): zero unless a process uses the
    engine, so its reader asks it while its process samples show a use (a hook: the gate)."""
    refresh = Refresh("gated", f"a process sample shows the {engine} in use")
    return Nvml(PERCENT, call=fn, member=0, value_type=UINT, refresh=refresh, hook=True)


BOARD: Final[tuple[Reading, ...]] = (
    Reading(
        "utilization_ratio",
        float,
        RATIO,
        "utilization",
        "Fraction of the sample period a kernel ran.",
        nvml=Nvml(PERCENT, call=_UTIL, member="gpu", value_type=UINT),
        sim=Simulated("utilization_gpu_percent", PERCENT),
        falcon_gpu=Publish(
            P + "utilization_ratio", RATIO, "Fraction of the sample period a kernel was running."
        ),
        dcgm=Publish(D + "GPU_UTIL", PERCENT, "GPU utilization (in %).", digits=3),
        openfalcon=Publish("GPUUtils", PERCENT),
        nvidia_smi=Publish(
            N + "utilization_gpu_ratio", RATIO, "utilization.gpu: fraction of the sample period a kernel ran."
        ),
    ),
    Reading(
        "memory_utilization_ratio",
        float,
        RATIO,
        "utilization",
        "Fraction of time the memory controller was busy.",
        nvml=Nvml(PERCENT, call=_UTIL, member="memory", value_type=UINT),
        sim=Simulated("utilization_memory_percent", PERCENT),
        falcon_gpu=Publish(
            P + "memory_utilization_ratio", RATIO, "Fraction of time the memory controller was busy."
        ),
        dcgm=Publish(D + "MEM_COPY_UTIL", PERCENT, "Memory utilization (in %).", digits=3),
        openfalcon=Publish("MemUtils", PERCENT),
        nvidia_smi=Publish(
            N + "utilization_memory_ratio",
            RATIO,
            "utilization.memory: fraction of time memory was read or written.",
        ),
    ),
    Reading(
        "memory_used_bytes",
        int,
        BYTES,
        "memory",
        "Framebuffer memory used (v1: including the reserved).",
        nvml=Nvml(BYTES, call=_MEMORY, member="used", hook=True),
        sim=Simulated("memory_used_bytes", BYTES),
        falcon_gpu=Publish(P + "memory_used_bytes", BYTES, "Framebuffer memory used."),
        dcgm=Publish(D + "FB_USED", MIB, "Framebuffer memory used (in MiB).", own=True),
        openfalcon=Publish("FBUsed", MIB),
        nvidia_smi=Publish(N + "memory_used_bytes", BYTES, "memory.used: framebuffer memory used."),
    ),
    Reading(
        "memory_free_bytes",
        int,
        BYTES,
        "memory",
        "Framebuffer memory free (NVML: total - used - reserved).",
        nvml=Nvml(BYTES, call=_MEMORY, member="free", hook=True),
        falcon_gpu=Publish(P + "memory_free_bytes", BYTES, "Framebuffer memory free."),
        dcgm=Publish(D + "FB_FREE", MIB, "Framebuffer memory free (in MiB).", own=True),
        openfalcon=Publish("FBfree", MIB),
        nvidia_smi=Publish(N + "memory_free_bytes", BYTES, "memory.free: framebuffer memory free."),
    ),
    Reading(
        "memory_total_bytes",
        int,
        BYTES,
        "memory",
        "Framebuffer memory installed.",
        nvml=Nvml(BYTES, call=_MEMORY, member="total", hook=True),
        sim=Simulated("memory_total_bytes", BYTES),
        falcon_gpu=Publish(P + "memory_total_bytes", BYTES, "Framebuffer memory installed."),
        openfalcon=Publish("FBtotal", MIB),
        nvidia_smi=Publish(N + "memory_total_bytes", BYTES, "memory.total: framebuffer memory installed."),
    ),
    Reading(
        "memory_reserved_bytes",
        int,
        BYTES,
        "memory",
        "Framebuffer memory the driver reserves (memory info v2).",
        nvml=Nvml(BYTES, call=_MEMORY, member="reserved", hook=True),
        sim=Simulated("memory_reserved_bytes", BYTES),
        falcon_gpu=Publish(P + "memory_reserved_bytes", BYTES, "Framebuffer memory reserved by the driver."),
        dcgm=Publish(D + "FB_RESERVED", MIB, "Framebuffer memory reserved (in MiB)."),
        nvidia_smi=Publish(
            N + "memory_reserved_bytes", BYTES, "memory.reserved: framebuffer memory the driver reserves."
        ),
    ),
    Reading(
        "temperature_celsius",
        float,
        CELSIUS,
        "thermal_power",
        "GPU core temperature.",
        nvml=Nvml(
            CELSIUS, call="nvmlDeviceGetTemperature", args=(pynvml.NVML_TEMPERATURE_GPU,), value_type=UINT
        ),
        sim=Simulated("temperature_celsius", CELSIUS),
        falcon_gpu=Publish(P + "temperature_celsius", CELSIUS, "GPU core temperature."),
        dcgm=Publish(D + "GPU_TEMP", CELSIUS, "GPU temperature (in C)."),
        openfalcon=Publish("DeviceTemperature", CELSIUS),
        nvidia_smi=Publish(
            N + "temperature_gpu", CELSIUS, "temperature.gpu: core GPU temperature in degrees C."
        ),
    ),
    Reading(
        "memory_temperature_celsius",
        float,
        CELSIUS,
        "thermal_power",
        "HBM/memory temperature.",
        nvml=Nvml(CELSIUS, field_ids=(pynvml.NVML_FI_DEV_MEMORY_TEMP,), value_type=UINT),
        sim=Simulated("memory_temperature_celsius", CELSIUS),
        falcon_gpu=Publish(P + "memory_temperature_celsius", CELSIUS, "HBM/memory temperature."),
        dcgm=Publish(D + "MEMORY_TEMP", CELSIUS, "Memory temperature (in C)."),
        openfalcon=Publish("MemTemperature", CELSIUS),
        nvidia_smi=Publish(
            N + "temperature_memory", CELSIUS, "temperature.memory: HBM temperature in degrees C."
        ),
    ),
    Reading(
        "slowdown_tlimit_celsius",
        float,
        CELSIUS,
        "thermal_power",
        "The T.Limit temperature at which the GPU may begin hardware slowdown (Ada and later), on "
        "nvidia-smi's T.Limit scale: degrees below the GPU's maximum operating temperature, below 0 past it.",
        nvml=Nvml(
            CELSIUS,
            field_ids=(pynvml.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT,),
            value_type=SINT,
        ),
        sim=Simulated("slowdown_tlimit_celsius", CELSIUS),
        falcon_gpu=Publish(
            P + "slowdown_tlimit_celsius",
            CELSIUS,
            "T.Limit temperature (degrees below the maximum) at which hardware slowdown may begin.",
        ),
    ),
    Reading(
        "shutdown_tlimit_celsius",
        float,
        CELSIUS,
        "thermal_power",
        "The T.Limit temperature below which the GPU may shut down to protect itself (Ada and later).",
        nvml=Nvml(
            CELSIUS,
            field_ids=(pynvml.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT,),
            value_type=SINT,
        ),
        sim=Simulated("shutdown_tlimit_celsius", CELSIUS),
        falcon_gpu=Publish(
            P + "shutdown_tlimit_celsius",
            CELSIUS,
            "T.Limit temperature (degrees below the maximum) at which the GPU may shut down.",
        ),
    ),
    Reading(
        "power_watts",
        float,
        WATTS,
        "thermal_power",
        "Power draw: the 1 s average where the GPU has it, else the instant value (what "
        "nvmlDeviceGetPowerUsage answers on each generation).",
        nvml=Nvml(
            MILLIWATTS,
            field_ids=(pynvml.NVML_FI_DEV_POWER_AVERAGE, pynvml.NVML_FI_DEV_POWER_INSTANT),
            call="nvmlDeviceGetPowerUsage",
            value_type=UINT,
            hook=True,
        ),
        sim=Simulated("power_watts", WATTS),
        falcon_gpu=Publish(P + "power_watts", WATTS, "Power draw."),
        dcgm=Publish(D + "POWER_USAGE", WATTS, "Power draw (in W)."),
        openfalcon=Publish("PowerUsed", WATTS),
        nvidia_smi=Publish(N + "power_draw_watts", WATTS, "power.draw: board power draw."),
    ),
    Reading(
        "power_limit_watts",
        float,
        WATTS,
        "thermal_power",
        "Enforced power limit (re-read once a minute).",
        nvml=Nvml(MILLIWATTS, call="nvmlDeviceGetEnforcedPowerLimit", value_type=UINT, refresh=SETTING),
        sim=Simulated("power_limit_watts", WATTS),
        falcon_gpu=Publish(P + "power_limit_watts", WATTS, "Enforced power limit."),
        dcgm=Publish(D + "POWER_MGMT_LIMIT", WATTS, "Power management limit (in W)."),
        openfalcon=Publish("PowerCurrentLimit", WATTS),
        nvidia_smi=Publish(
            N + "enforced_power_limit_watts", WATTS, "enforced.power.limit: the power limit in force."
        ),
    ),
    Reading(
        "energy_joules",
        float,
        JOULES,
        "thermal_power",
        "Energy consumed since the driver loaded.",
        nvml=Nvml(
            MILLIJOULES,
            field_ids=(pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,),
            call="nvmlDeviceGetTotalEnergyConsumption",
        ),
        sim=Simulated("energy_joules", JOULES),
        falcon_gpu=Publish(
            P + "energy_joules_total", JOULES, "Energy consumed since the driver loaded.", "counter"
        ),
        dcgm=Publish(
            D + "TOTAL_ENERGY_CONSUMPTION",
            MILLIJOULES,
            "Total energy consumption since boot (in mJ).",
            "counter",
        ),
        nvidia_smi=Publish(
            N + "energy_joules_total", JOULES, "Energy consumed since the driver loaded.", "counter"
        ),
    ),
    Reading(
        "performance_state",
        int,
        NUMBER,
        "thermal_power",
        "P-state, 0 (max) to 15 (min); 32 (unknown) is absent.",
        nvml=Nvml(NUMBER, call="nvmlDeviceGetPerformanceState", value_type=UINT, hook=True),
        sim=Simulated("performance_state", NUMBER),
        falcon_gpu=Publish(P + "performance_state", NUMBER, "Performance state, 0 (max) to 15 (min)."),
        dcgm=Publish(D + "PSTATE", NUMBER, "Performance state."),
        openfalcon=Publish("Performance", NUMBER),
        nvidia_smi=Publish(N + "pstate", NUMBER, "pstate: performance state, 0 (max) to 15 (min)."),
    ),
    Reading(
        "sm_clock_hertz",
        float,
        HERTZ,
        "clocks",
        "SM clock.",
        nvml=Nvml(MEGAHERTZ, call=_CLOCK, args=(pynvml.NVML_CLOCK_SM,), value_type=UINT),
        sim=Simulated("sm_clock_mhz", MEGAHERTZ),
        falcon_gpu=Publish(P + "sm_clock_hertz", HERTZ, "SM clock."),
        dcgm=Publish(D + "SM_CLOCK", MEGAHERTZ, "SM clock frequency (in MHz)."),
        openfalcon=Publish("SmClock", MEGAHERTZ),
        nvidia_smi=Publish(N + "clocks_current_sm_clock_hz", HERTZ, "clocks.current.sm: SM clock."),
    ),
    Reading(
        "memory_clock_hertz",
        float,
        HERTZ,
        "clocks",
        "Memory clock.",
        nvml=Nvml(
            MEGAHERTZ,
            call=_CLOCK,
            args=(pynvml.NVML_CLOCK_MEM,),
            value_type=UINT,
            refresh=Refresh("follows", "performance_state"),
        ),
        sim=Simulated("memory_clock_mhz", MEGAHERTZ),
        falcon_gpu=Publish(P + "memory_clock_hertz", HERTZ, "Memory clock."),
        dcgm=Publish(D + "MEM_CLOCK", MEGAHERTZ, "Memory clock frequency (in MHz)."),
        openfalcon=Publish("MemClock", MEGAHERTZ),
        nvidia_smi=Publish(
            N + "clocks_current_memory_clock_hz", HERTZ, "clocks.current.memory: memory clock."
        ),
    ),
    Reading(
        "fan_speed_ratio",
        float,
        RATIO,
        "thermal_power",
        "Fan speed as a fraction of its maximum.",
        nvml=Nvml(
            PERCENT,
            call="nvmlDeviceGetFanSpeed",
            value_type=UINT,
            refresh=Refresh("follows", "temperature_celsius"),
        ),
        sim=Simulated("fan_speed_percent", PERCENT),
        falcon_gpu=Publish(P + "fan_speed_ratio", RATIO, "Fan speed as a fraction of its maximum."),
        dcgm=Publish(D + "FAN_SPEED", PERCENT, "Fan speed (in %).", digits=3),
        openfalcon=Publish("FanSpeed", PERCENT),
        nvidia_smi=Publish(
            N + "fan_speed_ratio", RATIO, "fan.speed: intended fan speed as a fraction of its maximum."
        ),
    ),
    Reading(
        "encoder_utilization_ratio",
        float,
        RATIO,
        "utilization",
        "Video encoder utilisation.",
        nvml=_engine("nvmlDeviceGetEncoderUtilization", "encoder"),
        sim=Simulated("encoder_percent", PERCENT),
        falcon_gpu=Publish(P + "encoder_utilization_ratio", RATIO, "Video encoder utilisation."),
        dcgm=Publish(D + "ENC_UTIL", PERCENT, "Encoder utilization (in %).", digits=3),
        openfalcon=Publish("Encoder", PERCENT),
        nvidia_smi=Publish(
            N + "utilization_encoder_ratio", RATIO, "utilization.encoder: video encoder utilisation."
        ),
    ),
    Reading(
        "decoder_utilization_ratio",
        float,
        RATIO,
        "utilization",
        "Video decoder utilisation.",
        nvml=_engine("nvmlDeviceGetDecoderUtilization", "decoder"),
        sim=Simulated("decoder_percent", PERCENT),
        falcon_gpu=Publish(P + "decoder_utilization_ratio", RATIO, "Video decoder utilisation."),
        dcgm=Publish(D + "DEC_UTIL", PERCENT, "Decoder utilization (in %).", digits=3),
        openfalcon=Publish("Decoder", PERCENT),
        nvidia_smi=Publish(
            N + "utilization_decoder_ratio", RATIO, "utilization.decoder: video decoder utilisation."
        ),
    ),
    Reading(
        "pcie_replays",
        int,
        NUMBER,
        "health",
        "PCIe replay counter.",
        nvml=Nvml(
            NUMBER,
            field_ids=(pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER,),
            call="nvmlDeviceGetPcieReplayCounter",
            hook=True,
        ),
        sim=Simulated("pcie_replays", NUMBER),
        falcon_gpu=Publish(P + "pcie_replays_total", NUMBER, "PCIe replay counter.", "counter"),
        dcgm=Publish(D + "PCIE_REPLAY_COUNTER", NUMBER, "Total number of PCIe retries.", "counter"),
        openfalcon=Publish("Replays", NUMBER),
    ),
)
"""The board's own readings, in publishing order."""

INTERCONNECT: Final[tuple[Reading, ...]] = (
    Reading(
        "pcie_tx_bytes",
        int,
        BYTES,
        "interconnect",
        "PCIe bytes transmitted since the driver loaded.",
        nvml=Nvml(BYTES, field_ids=(_PCIE_TX,), hook=True),
        sim=Simulated("tx_bytes", BYTES, group="pcie"),
        falcon_gpu=Publish(
            P + "pcie_transmit_bytes_total", BYTES, "PCIe bytes sent since the driver loaded.", "counter"
        ),
    ),
    Reading(
        "pcie_rx_bytes",
        int,
        BYTES,
        "interconnect",
        "PCIe bytes received since the driver loaded.",
        nvml=Nvml(BYTES, field_ids=(_PCIE_RX,), hook=True),
        sim=Simulated("rx_bytes", BYTES, group="pcie"),
        falcon_gpu=Publish(
            P + "pcie_receive_bytes_total", BYTES, "PCIe bytes received since the driver loaded.", "counter"
        ),
    ),
    Reading(
        "nvlink_tx_bytes",
        int,
        BYTES,
        "interconnect",
        "NVLink data bytes sent since the driver loaded, all links.",
        derived="the sum over the links of NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX (KiB, the link as scopeId)",
        falcon_gpu=Publish(
            P + "nvlink_transmit_bytes_total", BYTES, "NVLink data bytes sent, all links.", "counter"
        ),
    ),
    Reading(
        "nvlink_rx_bytes",
        int,
        BYTES,
        "interconnect",
        "NVLink data bytes received since the driver loaded.",
        derived="the sum over the links of NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        falcon_gpu=Publish(
            P + "nvlink_receive_bytes_total", BYTES, "NVLink data bytes received, all links.", "counter"
        ),
    ),
    Reading(
        "pcie_tx_bytes_per_second",
        float,
        BYTES_PER_SECOND,
        "interconnect",
        "PCIe bytes sent per second.",
        derived="pcie_tx_bytes' rate since the previous cycle (absent on the first and over a reset)",
        dcgm=Publish(
            PROF + "PCIE_TX_BYTES",
            BYTES_PER_SECOND,
            "The rate of data transmitted over the PCIe bus, in bytes per second.",
        ),
        openfalcon=Publish("Tx", MIB_PER_SECOND),
        nvidia_smi=Publish(
            N + "pcie_throughput_tx_bytes_per_second", BYTES_PER_SECOND, "PCIe bytes sent per second."
        ),
    ),
    Reading(
        "pcie_rx_bytes_per_second",
        float,
        BYTES_PER_SECOND,
        "interconnect",
        "PCIe bytes received per second.",
        derived="pcie_rx_bytes' rate since the previous cycle",
        dcgm=Publish(
            PROF + "PCIE_RX_BYTES",
            BYTES_PER_SECOND,
            "The rate of data received over the PCIe bus, in bytes per second.",
        ),
        openfalcon=Publish("Rx", MIB_PER_SECOND),
        nvidia_smi=Publish(
            N + "pcie_throughput_rx_bytes_per_second", BYTES_PER_SECOND, "PCIe bytes received per second."
        ),
    ),
    Reading(
        "nvlink_tx_bytes_per_second",
        float,
        BYTES_PER_SECOND,
        "interconnect",
        "NVLink data bytes sent per second.",
        derived="nvlink_tx_bytes' rate since the previous cycle",
        dcgm=Publish(
            PROF + "NVLINK_TX_BYTES",
            BYTES_PER_SECOND,
            "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
        ),
        openfalcon=Publish("NvlinkTx", MIB_PER_SECOND),
    ),
    Reading(
        "nvlink_rx_bytes_per_second",
        float,
        BYTES_PER_SECOND,
        "interconnect",
        "NVLink data bytes received per second.",
        derived="nvlink_rx_bytes' rate since the previous cycle",
        dcgm=Publish(
            PROF + "NVLINK_RX_BYTES",
            BYTES_PER_SECOND,
            "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
        ),
        openfalcon=Publish("NvlinkRx", MIB_PER_SECOND),
    ),
)
"""PCIe and NVLink traffic, in publishing order."""

READINGS: Final = BOARD + INTERCONNECT
BY_FIELD: Final[dict[str, Reading]] = {r.field: r for r in READINGS}
