#!/usr/bin/env bash
# Installs what building and testing headroom needs, from Debian's packages. Idempotent: does nothing
# when everything is already there.
set -euo pipefail
packages=(cmake g++ make libeigen3-dev nlohmann-json3-dev libcli11-dev libboost-graph-dev libgtest-dev
          libgmock-dev libbenchmark-dev pybind11-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
