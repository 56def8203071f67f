#!/usr/bin/env bash
# Device check (issues 2, 11 and 20): run falcon-gpu against a real NVIDIA GPU and compare with
# nvidia-smi and, on Hopper, with NVML's GPM read directly (scripts/device_gpm_check.py, which also
# measures the real NVML cost per call and per cycle for docs/BENCHMARKS.md); then the real-bindings
# tier (tests/real_nvml, docs/TESTING.md) against the driver's own library (FALCON_GPU_TEST_NVML_LIB,
# no mock: the tests that need the mock's profiles or failure injection skip), and the all-links
# NVLink throughput sum (scripts/device_nvlink_sum_check.py).
#
# What to look at for docs/BENCHMARKS.md ("NVLink: the all-links sum on a real driver"), in
# $OUT/device-check.txt under "== NVLink all-links sum": per GPU and direction, whether scopeId
# UINT_MAX answers rc=0 (SUCCESS) and whether its value equals the per-link sum of the same call
# (within what moved between the reads), or answers 0 / NOT_SUPPORTED (3) / INVALID_ARGUMENT (2), in
# which case falcon_gpu's fallback to the per-link scopes is what counts. Write the driver version,
# the GPU model and the answer there. (No device was lent in the session that wrote this: not run yet.)
#
# Meant for a lent GPU machine (see the device tool); prepare here first:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl nvidia-ml-py tenacity pydantic-settings pydantic pydantic-core typing-extensions \
#     typing-inspection annotated-types python-dotenv requests urllib3 idna certifi \
#     charset-normalizer protobuf cramjam grpcio pytest pluggy iniconfig packaging pyyaml msgspec
#   python3 -m pip wheel --no-deps -w .whl .
# then run this script there with `.whl` carried. Output lands in $OUT (or ./out).
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
log="$OUT/device-check.txt"
{
  echo "== nvidia-smi"; nvidia-smi -L
  # a small CUDA job so a process shows up (PyTorch is on the lent machine)
  python3 - <<'PY' &
import time, torch
x = torch.randn(8192, 8192, device="cuda")
end = time.time() + 75
while time.time() < end:
    x = (x @ x).clamp_(-1, 1)
torch.cuda.synchronize()
PY
  job=$!
  sleep 12
  echo "== falcon-gpu doctor"; python3 -m falcon_gpu doctor
  echo "== falcon-gpu run --once (stdout, prometheus)"
  FALCON_GPU_PROCESS_METRICS=true python3 -m falcon_gpu run --once > "$OUT/cycle.prom"
  echo "== nvidia-smi at the same moment"
  nvidia-smi --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm \
    --format=csv,nounits
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,nounits
  echo "== falcon-gpu's view"
  grep -E '^falcon_gpu_(utilization_ratio|memory_used_bytes|memory_total_bytes|temperature_celsius|power_watts|sm_clock_hertz|process_memory_used_bytes|up)\{' "$OUT/cycle.prom"
  echo "== plugin"; python3 plugins/60_gpu_monitor.py | head -c 2000; echo
  # issue 11: GPM (needs two cycles: the first has no interval yet), PCIe, NVLink, the real NVML cost
  echo "== falcon-gpu run, 3 cycles 2 s apart (GPM from the second)"
  timeout 7 python3 -m falcon_gpu run --interval 2 > "$OUT/cycles.prom"
  grep -E '^falcon_gpu_(sm_active|sm_occupancy|tensor_active|dram_active|graphics_active)_ratio\{|^falcon_gpu_(pcie|nvlink)_[a-z_]*_total\{' \
    "$OUT/cycles.prom" | tail -40
  echo "== nvidia-smi dmon -s u (sm %, mem %) and utilization.gpu"
  nvidia-smi dmon -s u -c 3
  nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory --format=csv,nounits
  echo "== pynvml GPM directly, and NVML's real cost per call"
  python3 scripts/device_gpm_check.py
  wait $job
  # issue 20 item 8: the all-links NVLink sum, and the real-bindings tier on the driver's library
  python3 - <<'PY' &
import time, torch
x = torch.randn(4096, 4096, device="cuda")
ys = [x.to(f"cuda:{d}") for d in range(torch.cuda.device_count())]  # peer copies move NVLink counters
end = time.time() + 20
while time.time() < end:
    for d in range(1, len(ys)):
        ys[d].copy_(ys[0])
torch.cuda.synchronize()
PY
  job=$!
  sleep 5
  echo "== NVLink all-links sum"; python3 scripts/device_nvlink_sum_check.py
  wait $job
  nvml_lib=$(ldconfig -p | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
  echo "== real-bindings tier on $nvml_lib"
  FALCON_GPU_TEST_NVML_LIB=$nvml_lib python3 -m pytest -q -p no:cacheprovider -o addopts=-ra tests/real_nvml
} 2>&1 | tee "$log"
