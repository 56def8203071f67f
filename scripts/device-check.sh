#!/usr/bin/env bash
# Device check (issues 2 and 11): run falcon-gpu against a real NVIDIA GPU and compare with nvidia-smi
# and, on Hopper, with NVML's GPM read directly (scripts/device_gpm_check.py, which also measures the
# real NVML cost per call and per cycle for docs/BENCHMARKS.md).
#
# Meant for a lent GPU machine (see the device tool); prepare here first:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl nvidia-ml-py tenacity pydantic-settings pydantic pydantic-core typing-extensions \
#     typing-inspection annotated-types python-dotenv requests urllib3 idna certifi \
#     charset-normalizer protobuf cramjam grpcio
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
} 2>&1 | tee "$log"
