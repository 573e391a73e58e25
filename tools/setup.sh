#!/usr/bin/env bash
# Installs what building and testing headroom needs, from Debian's packages (and matplotlib/pytest with pip).
# Idempotent: does nothing when everything is already there.
set -euo pipefail
# libyaml-dev: NeMo's YAML configs (check); libopenmpi-dev/openmpi-bin: calibrate --mpi; clang + libclang-rt-14-dev: the libFuzzer targets;
# clang-tidy + clang-format + cppcheck: the lint gate in .ci/run; chromium: the plan page's test (headless);
# ninja-build: the presets' generator; ccache: `pip install .` compiles the same objects as the release build again.
packages=(cmake ninja-build ccache g++ make libeigen3-dev nlohmann-json3-dev libcli11-dev libboost-graph-dev libgtest-dev
          libgmock-dev libbenchmark-dev pybind11-dev libyaml-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev
          clang-tidy clang-format cppcheck chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python: pytest runs tests/python (ctest's python_bindings), numpy holds Planner.estimate_many's columns, matplotlib draws tools/scripts/plot.py's figures, ruff and mypy are the lint gate's.
python_missing=()
for m in numpy matplotlib pytest ruff mypy; do
  python3 -c "import $m" 2>/dev/null || python_missing+=("$m")
done
if [ ${#python_missing[@]} -gt 0 ]; then
  echo "setup: pip installing ${python_missing[*]}" >&2
  python3 -m pip install --quiet "${python_missing[@]}" ||
    python3 -m pip install --quiet --break-system-packages "${python_missing[@]}"  # Debian's PEP 668 guard
fi
