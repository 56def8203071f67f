"""Busy ratios: GPU and memory controller (utilisation rates, read by the table), encoder and decoder.

The utilisation rates are asked every cycle, one call for both. The encoder and decoder utilisation are zero
unless a process uses the engine, and every process that does shows it in its
``nvmlDeviceGetProcessUtilization`` samples (``encUtil`` / ``decUtil``, per process and
sample; pynvml's ``c_nvmlProcessUtilizationSample_t``: pid, timeStamp, smUtil, memUtil, encUtil,
decUtil): the device's engine utilisation is asked only when a sample of this cycle shows the
engine in use, when its last answer was above zero (to see it fall back to zero), and at
least once a minute (:meth:`~falcon_gpu.sources.nvml.slow.SlowReadings.gated`); otherwise the
last answer, zero, stands. Where NVML has no process utilisation (NOT_SUPPORTED: MIG-enabled
GPUs, some boards) both are asked every cycle.
"""

from __future__ import annotations

from typing import Any

from falcon_gpu.readings.units import PERCENT_PER_RATIO
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.processes import process_samples
from falcon_gpu.sources.nvml.readers.table import TableRows, read_table, table_call

TABLE = TableRows("utilization")
_ENCODER, _DECODER = table_call("encoder_utilization_ratio"), table_call("decoder_utilization_ratio")


def _idle(answer: Any) -> bool:
    """[utilisation percent, sampling period µs] with the engine at zero."""
    return answer is not ABSENT and not answer[0]


def read_utilization(ctx: DeviceContext) -> Fields:
    out = read_table(ctx, TABLE)
    nvml, scope, h = ctx.nvml, ctx.scope, ctx.handle
    call = nvml.call
    samples = process_samples(ctx)
    gated, now = ctx.slow.gated, ctx.timestamp
    enc = gated(nvml, now, scope, "encoder", call, scope, "encoder", _ENCODER, h,
                in_use=samples.encoder_in_use, idle=_idle)  # fmt: skip
    if enc is not ABSENT:
        out["encoder_utilization_ratio"] = enc[0] / PERCENT_PER_RATIO
    dec = gated(nvml, now, scope, "decoder", call, scope, "decoder", _DECODER, h,
                in_use=samples.decoder_in_use, idle=_idle)  # fmt: skip
    if dec is not ABSENT:
        out["decoder_utilization_ratio"] = dec[0] / PERCENT_PER_RATIO
    return out
