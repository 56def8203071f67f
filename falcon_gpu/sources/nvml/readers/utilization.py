"""Busy ratios: GPU and memory controller (utilisation rates), encoder and decoder."""

from __future__ import annotations

from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, ratio


def read_utilization(ctx: DeviceContext) -> Fields:
    out: Fields = {}
    rates = ctx.nvml.call(ctx.scope, "utilization", "nvmlDeviceGetUtilizationRates", ctx.handle)
    if rates is not ABSENT:
        out["utilization_ratio"] = ratio(rates.gpu)
        out["memory_utilization_ratio"] = ratio(rates.memory)
    # Both answer [utilisation percent, sampling period µs].
    enc = ctx.nvml.call(ctx.scope, "encoder", "nvmlDeviceGetEncoderUtilization", ctx.handle)
    if enc is not ABSENT:
        out["encoder_utilization_ratio"] = ratio(enc[0])
    dec = ctx.nvml.call(ctx.scope, "decoder", "nvmlDeviceGetDecoderUtilization", ctx.handle)
    if dec is not ABSENT:
        out["decoder_utilization_ratio"] = ratio(dec[0])
    return out
