#!/usr/bin/env bash
# The small-rows product with 64, 128 or 256 K per stage, loads alone, and a plain read of each
# weight (dev/cuda/small_rows_gemm_bench.cu); then the split-keys run: gpu-bundle/split-keys-run.sh
# was a copy of docs/results/2026-12-03-h200-split-keys/run2.sh (parts of >= 1,024 keys then).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
timeout 150 gpu-bundle/small_rows_bench > $OUT/small-rows.txt 2>&1; echo "small-rows bench rc $?"
grep -v "choice" $OUT/small-rows.txt | grep -E "read once| 32 |K per stage|differ from" 
[ -f gpu-bundle/split-keys-run.sh ] && bash gpu-bundle/split-keys-run.sh
