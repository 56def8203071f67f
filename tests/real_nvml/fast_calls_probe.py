"""Run in a fresh interpreter on the real bindings (``python -m tests.real_nvml.fast_calls_probe MODE``):
what the fast path (:mod:`falcon_gpu.sources.nvml.direct`) and pynvml's own wrappers answer, as JSON
on stdout, for ``test_fast_calls.py`` to compare (pynvml loads the library once per process).

Every C call is counted: pynvml's wrappers and the fast path both take their function pointers from
``pynvml._nvmlGetFunctionPointer``, which this probe wraps before anything asks it.

Modes:

- ``answers``: per GPU, the same requests asked both ways: field values (every field the agent asks,
  the per-link scopes, an ID no driver knows), each process list, the process-utilisation samples.
- ``cycles fast|pynvml N``: ``N`` cycles of the NVML source, the fast path on or off; the last
  cycle's device readings (``repr``) and the C calls per GPU per cycle after the first.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

import pynvml

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sources.nvml.calls import ABSENT, DeviceGone, NvmlCaller
from falcon_gpu.sources.nvml.direct import DirectCalls, FieldRequest
from falcon_gpu.sources.nvml.field_values import FIELDS, VALUE_ATTR
from falcon_gpu.sources.nvml.readers.memory import MEMORY_FALLBACK, memory_variants
from falcon_gpu.sources.nvml.readers.processes import _VARIANTS, LISTS
from falcon_gpu.sources.nvml.source import NvmlSource

CALLS: Counter[str] = Counter()
_pointer = pynvml._nvmlGetFunctionPointer


class _Counted:
    def __init__(self, name: str, fn: Any) -> None:
        self.name, self.fn = name, fn

    def __call__(self, *args: Any) -> Any:
        CALLS[self.name] += 1
        return self.fn(*args)


def _counted_pointer(name: str) -> Any:
    return _Counted(name, _pointer(name))


pynvml._nvmlGetFunctionPointer = _counted_pointer

DL_FIELDS = (
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY,
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY,
    pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC,
)
UNKNOWN_FIELD = 9999


def requests() -> list[Any]:
    """What the agent asks, each per-link DL error field on links 0-17, and a field ID no driver knows."""
    asked: list[Any] = [spec.request for spec in FIELDS]
    asked += [(field, link) for field in DL_FIELDS for link in range(18)]
    return [*asked, UNKNOWN_FIELD]


def _row(value: Any) -> list[Any]:
    attr = VALUE_ATTR.get(int(value.valueType))
    number = None if attr is None or value.nvmlReturn != pynvml.NVML_SUCCESS else getattr(value.value, attr)
    return [int(value.fieldId), int(value.scopeId), int(value.nvmlReturn), int(value.valueType), number]


def _processes(found: Any) -> Any:
    if not isinstance(found, list):
        return repr(found)
    return [[p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId] for p in found]


def _samples(found: Any) -> Any:
    if not isinstance(found, (list, tuple)):
        return repr(found)
    return [[s.pid, s.smUtil, s.memUtil, s.encUtil, s.decUtil] for s in found]


def answers() -> dict[str, Any]:
    pynvml.nvmlInit()
    nvml = NvmlCaller(pynvml)
    assert nvml.functions is not None, "the fast path does not apply to the real pynvml"
    fn = nvml.functions.get("nvmlDeviceGetFieldValues")
    asked = requests()
    out: dict[str, Any] = {"gpus": []}
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        scope = f"gpu{index}"
        request = FieldRequest(asked)
        gpu: dict[str, Any] = {}
        gpu["fields_pynvml"] = [_row(v) for v in pynvml.nvmlDeviceGetFieldValues(handle, asked)]
        code = request.call(fn, handle)
        gpu["fields_code"] = code
        gpu["fields_fast"] = [_row(v) for v in request.array]
        request.call(fn, handle)  # asked again: the array is reset, the answer the same
        gpu["fields_fast_again"] = [_row(v) for v in request.array]
        direct = DirectCalls(nvml)
        for kind, base in LISTS:
            field = f"processes_{kind}"
            try:
                theirs = _processes(getattr(pynvml, f"{base}_v3")(handle))
            except pynvml.NVMLError as exc:
                theirs = f"NVMLError {exc.value}"
            ours = direct.process_list(scope, field, _VARIANTS[kind], handle)
            gpu[f"{kind}_pynvml"] = theirs
            gpu[f"{kind}_fast"] = _processes(ours)
        no_samples = {pynvml.NVML_SUCCESS: (), pynvml.NVML_ERROR_NOT_FOUND: ()}
        try:
            theirs_s: Any = _samples(pynvml.nvmlDeviceGetProcessUtilization(handle, 0))
        except pynvml.NVMLError as exc:
            theirs_s = f"NVMLError {exc.value}"
        gpu["samples_pynvml"] = theirs_s
        gpu["samples_fast"] = _samples(direct.process_samples(scope, handle, 0, no_samples))
        try:
            mine = direct.memory_info(scope, handle, memory_variants(nvml.lib), MEMORY_FALLBACK)
            gpu["memory_fast"] = (
                repr(mine) if mine is ABSENT else [mine.total, mine.reserved, mine.free, mine.used]
            )
        except DeviceGone as gone:
            gpu["memory_fast"] = f"DeviceGone {gone.code}"
        try:
            theirs_m = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
            gpu["memory_pynvml"] = [theirs_m.total, theirs_m.reserved, theirs_m.free, theirs_m.used]
        except pynvml.NVMLError as exc:
            gpu["memory_pynvml"] = f"NVMLError {exc.value}"
        gpu["errors"] = list(nvml.errors)
        out["gpus"].append(gpu)
    return out


def cycles(mode: str, n: int) -> dict[str, Any]:
    source = NvmlSource(pynvml, Telemetry())
    if mode == "pynvml":
        source.caller.functions = None
    snapshot = source.collect(time.time())
    gpus = max(1, len(snapshot.devices))
    CALLS.clear()
    for i in range(n - 1):
        snapshot = source.collect(time.time() + 0.5 * (i + 1))
    per_gpu = {name: count / (n - 1) / gpus for name, count in sorted(CALLS.items())}
    return {
        "devices": [repr(d) for d in snapshot.devices],
        "up": [d.up for d in snapshot.devices],
        "calls_per_gpu": per_gpu,
    }


def main() -> None:
    out = answers() if sys.argv[1] == "answers" else cycles(sys.argv[2], int(sys.argv[3]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
