"""Device check (issue 20 item 8): what a real driver answers for the all-links NVLink throughput sum.

falcon_gpu asks ``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX`` with ``scopeId`` UINT_MAX (nvml.h: "the
aggregate value of all links") and falls back to the per-link scopes where that answers
NOT_SUPPORTED / INVALID_ARGUMENT. NVIDIA's NVML mock answers SUCCESS 0 for UINT_MAX (the per-link
scopes carry the counters), so only a real driver can say which it is. For each GPU this prints, per
direction, the UINT_MAX answer (return code and value) beside the sum of the per-link answers taken
in the same call, twice 2 s apart (under the script's CUDA job the counters move); the answer for
docs/BENCHMARKS.md is: does UINT_MAX answer SUCCESS, and is its value the per-link sum (within the
movement between the reads of one call), or 0?
"""

from __future__ import annotations

import time

import pynvml

ALL_LINKS = 0xFFFFFFFF
LINKS = 18


def one_read(handle: object) -> dict[str, tuple[int, int, int]]:
    """direction -> (UINT_MAX return code, its value, the per-link sum) from one call."""
    out = {}
    for name, field in (("tx", pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX),
                        ("rx", pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)):  # fmt: skip
        values = pynvml.nvmlDeviceGetFieldValues(
            handle, [(field, ALL_LINKS)] + [(field, i) for i in range(LINKS)]
        )
        links = sum(int(v.value.ullVal) for v in values[1:] if v.nvmlReturn == pynvml.NVML_SUCCESS)
        out[name] = (int(values[0].nvmlReturn), int(values[0].value.ullVal), links)
    return out


def main() -> None:
    pynvml.nvmlInit()
    print("driver", pynvml.nvmlSystemGetDriverVersion())
    for i in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        first = one_read(handle)
        time.sleep(2)
        second = one_read(handle)
        for direction in ("tx", "rx"):
            (code1, all1, sum1), (code2, all2, sum2) = first[direction], second[direction]
            print(f"GPU {i} {pynvml.nvmlDeviceGetName(handle)} {direction}: UINT_MAX rc={code1}/{code2} "
                  f"value={all1}/{all2} KiB; per-link sum={sum1}/{sum2} KiB")  # fmt: skip
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
