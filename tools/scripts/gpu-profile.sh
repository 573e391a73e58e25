#!/usr/bin/env bash
# The prepared GPU run: on a bare single-GPU machine (CUDA, PyTorch; no build, no network) measure the kernels
# training frameworks call, by shape, after a self-test against a float64 CPU reference, within about 7 minutes,
# and leave the profile in OUT (kernel_profile.json, sweep.log).
#
#   tools/scripts/gpu-profile.sh OUT [BUDGET_S]        BUDGET_S: seconds before no new shape is started (400)
#   tools/scripts/gpu-profile.sh OUT 60 --device cpu --quick --fp8 on     # the dry run on a machine without a GPU
set -euo pipefail
out=${1:?usage: gpu-profile.sh OUT [BUDGET_S] [extra flags]}
budget=${2:-400}
shift $(($# > 1 ? 2 : 1))
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
  --format=csv | tee "$out/sweep.log"
python3 "$root/tools/scripts/gpu_kernel_sweep.py" --out "$out" --budget-s "$budget" "$@" 2>&1 | tee -a "$out/sweep.log"
