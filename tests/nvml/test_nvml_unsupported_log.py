"""What the GPUs lack is said once per GPU model (issue 20 item 5), each GPU's detail at debug."""

from __future__ import annotations

import logging

import pytest

from falcon_gpu.sources.nvml.unsupported import UnsupportedLog

MODELS = {"GPU-a": "NVIDIA H100", "GPU-b": "NVIDIA H100", "GPU-c": "NVIDIA T4"}
GPUS = {"NVIDIA H100": 2, "NVIDIA T4": 1}.get


def _info(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    caplog.clear()
    return lines


def test_one_line_per_model_then_only_what_is_new(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "falcon_gpu.nvml")
    log = UnsupportedLog()
    for scope in ("GPU-a", "GPU-b"):
        log.note(scope, "fan_speed")
        log.note(scope, "18 NVLink fields")
    log.note("GPU-c", "fan_speed")
    log.note("GPU-a/gi1", "GPM")  # a MIG instance's lack is its GPU model's: only one of two has it
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 6  # each detail at debug
    log.report(MODELS.get, lambda model: GPUS(model, 0))
    assert _info(caplog) == [
        "NVML: NVIDIA H100 (2 GPUs) does not support fan_speed, 18 NVLink fields, GPM (on 1 of them); "
        "not asking again "
        "(each GPU at debug level)",
        "NVML: NVIDIA T4 does not support fan_speed; not asking again (each GPU at debug level)",
    ]
    log.note("GPU-b", "fan_speed")  # asked again (MIG mode changed): said before, so not again
    log.note("GPU-c", "inforom")
    log.report(MODELS.get, lambda model: GPUS(model, 0))
    assert _info(caplog) == [
        "NVML: NVIDIA T4 does not support inforom; not asking again (each GPU at debug level)"
    ]
    assert not log.pending
    log.report(MODELS.get, lambda model: GPUS(model, 0))
    assert _info(caplog) == []


def test_a_scope_of_no_gpu_is_said_as_is(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "falcon_gpu.nvml")
    log = UnsupportedLog()
    log.note("system", "cuda_version")
    log.report(MODELS.get, lambda model: GPUS(model, 0))
    assert _info(caplog) == [
        "NVML: system does not support cuda_version; not asking again (each GPU at debug level)"
    ]
