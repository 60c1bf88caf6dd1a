#!/usr/bin/env bash
# Installs the Debian 12 packages Mosaic builds and tests with, when any is missing; with
# arguments, those packages instead (tools/train/prepare.sh names its own).
# Needs root (or sudo) only if something has to be installed.
#
#   scripts/install-deps.sh [PACKAGE ...]
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang libomp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev
  python3 python3-numpy python3-pytest
  python3-dev pybind11-dev python3-venv python3-pip python3-setuptools python3-wheel
  nodejs npm ca-certificates
)
if [ $# -gt 0 ]; then packages=("$@"); fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
# nodejs/npm may come from elsewhere (nvm, a newer distribution): accept a working npm on PATH.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs}")
  missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
