#!/usr/bin/env bash
# Builds the CUDA backend, the mosaic command and the GPU tests for sm_90 into BUILD_DIR
# (default build-gpu), small enough to carry to a GPU machine: Release, no debug info, no
# benchmarks, binaries stripped. Debian-only libraries are linked statically (PCRE2, utf8proc,
# fmt is compiled in); CUDA libraries come from the target's toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOSAIC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${MOSAIC_CUDA_ARCHITECTURES:-90}" -DMOSAIC_BUILD_BENCH=OFF -DMOSAIC_BUILD_PYTHON=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-s" >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target mosaic mosaic_backend_cuda_test mosaic_mem_test mosaic_gpu_test
du -sh "$build"
