"""A process name that is not UTF-8 (Linux allows any bytes): pynvml's own wrapper decodes the
answer strictly and raises UnicodeDecodeError; the name is still the name, decoded with replacement,
and a name with a lone surrogate (the simulator's ``\\udcff``) is replaced too."""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.sources.nvml.calls import NvmlCaller
from falcon_gpu.sources.nvml.process_names import ProcessNames


class Lib:
    def __init__(self, names: dict[int, Any]) -> None:
        @pynvml.convertStrBytes  # the real binding's decoding: bytes.decode() strict
        def get(pid: int) -> Any:
            return names[pid]

        self.nvmlSystemGetProcessName = get


def test_a_process_name_that_is_not_utf8_is_decoded_with_replacement() -> None:
    nvml = NvmlCaller(Lib({1: b"tr\xffin.py", 2: b"python", 3: "sim\udcffname"}))  # type: ignore[arg-type]
    names = ProcessNames(nvml)
    assert names.get(1) == "tr\ufffdin.py"
    assert names.get(2) == "python"
    assert names.get(3) == "sim\ufffdname"
    assert nvml.errors == []  # an answer, not a failure
