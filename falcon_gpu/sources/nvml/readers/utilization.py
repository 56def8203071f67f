"""Busy ratios: GPU and memory controller (utilisation rates), encoder and decoder.

The utilisation rates are asked every cycle. The encoder and decoder utilisation are zero
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

from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, ratio
from falcon_gpu.sources.nvml.readers.processes import process_samples


def _idle(answer: Any) -> bool:
    """[utilisation percent, sampling period µs] with the engine at zero."""
    return answer is not ABSENT and not answer[0]


def _engine(ctx: DeviceContext, field: str, fn_name: str, in_use: bool) -> Any:
    nvml, scope, handle = ctx.nvml, ctx.scope, ctx.handle
    return ctx.slow.gated(
        nvml, ctx.timestamp, scope, field, nvml.call, scope, field, fn_name, handle,
        in_use=in_use, idle=_idle,
    )  # fmt: skip


def read_utilization(ctx: DeviceContext) -> Fields:
    out: Fields = {}
    rates = ctx.nvml.call(ctx.scope, "utilization", "nvmlDeviceGetUtilizationRates", ctx.handle)
    if rates is not ABSENT:
        out["utilization_ratio"] = ratio(rates.gpu)
        out["memory_utilization_ratio"] = ratio(rates.memory)
    samples = process_samples(ctx)
    enc = _engine(ctx, "encoder", "nvmlDeviceGetEncoderUtilization", samples.encoder_in_use)
    if enc is not ABSENT:
        out["encoder_utilization_ratio"] = ratio(enc[0])
    dec = _engine(ctx, "decoder", "nvmlDeviceGetDecoderUtilization", samples.decoder_in_use)
    if dec is not ABSENT:
        out["decoder_utilization_ratio"] = ratio(dec[0])
    return out
