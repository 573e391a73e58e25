#!/usr/bin/env bash
# Installs what compiling the GPU backends needs and Debian packages: hipcc and the HIP runtime headers
# (ROCm 5.2; Debian has no hipBLASLt, rocBLAS or RCCL). CUDA is not a Debian package: nvcc 13 is expected at
# /usr/local/cuda (or $CUDACXX). Idempotent.
set -euo pipefail
packages=(hipcc libamdhip64-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "setup-gpu-toolchains: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
if [ ! -x "$nvcc" ]; then
  echo "setup-gpu-toolchains: no nvcc at $nvcc (install the CUDA toolkit or set CUDACXX)" >&2
  exit 1
fi
