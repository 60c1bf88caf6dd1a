#!/usr/bin/env bash
# Runs Mosaic's GPU tests on a machine with an NVIDIA GPU and prints a short summary.
#
#   scripts/gpu-test.sh [BUILD_DIR]
#
# BUILD_DIR (default build-gpu) is used as it is when it already holds the test binaries — e.g.
# built on a development machine with scripts/build-gpu.sh and carried over — and is configured
# and built here otherwise (needs CMake, Ninja, a C++20 compiler, the CUDA toolkit).
# Results also go to $OUT/gpu-tests/ when OUT is set (the device tool's output folder).
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
binaries=(src/backend/cuda/mosaic_backend_cuda_test src/mem/mosaic_mem_test tests/gpu/mosaic_gpu_test)

if [ ! -x "$build/tests/gpu/mosaic_gpu_test" ]; then
  echo "== building $build"
  scripts/build-gpu.sh "$build" || exit 1
fi
logs="${OUT:-/tmp}/gpu-tests"
mkdir -p "$logs"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$logs/gpu.txt"

declare -A result
for binary in "${binaries[@]}"; do
  name=$(basename "$binary")
  echo "== $name"
  if "$build/$binary" --gtest_brief=1 >"$logs/$name.log" 2>&1; then result[$name]=pass; else result[$name]=FAIL; fi
  tail -n 25 "$logs/$name.log"
done

echo "== compute-sanitizer memcheck"
if command -v compute-sanitizer >/dev/null 2>&1; then
  for binary in src/backend/cuda/mosaic_backend_cuda_test tests/gpu/mosaic_gpu_test; do
    name="memcheck-$(basename "$binary")"
    # Left out: the test that makes a capture fail on purpose (its refused API calls are what
    # memcheck counts as errors; it runs, and passes, in the plain run above).
    if compute-sanitizer --tool memcheck --error-exitcode 1 "$build/$binary" --gtest_brief=1 \
        --gtest_filter=-*ACaptureCudaRefusesFallsBackToDirectLaunches* >"$logs/$name.log" 2>&1; then result[$name]=pass; else result[$name]=FAIL; fi
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$logs/$name.log" | tail -n 5
  done
else
  echo "compute-sanitizer not found: skipped"
fi

echo
echo "== summary"
status=0
for name in "${!result[@]}"; do
  printf '  %-40s %s\n' "$name" "${result[$name]}"
  [ "${result[$name]}" = pass ] || status=1
done
exit $status
