#!/usr/bin/env bash
# Session 10, run 5: the LM head's fold (partials_from_logits_kernel) under ncu at 4k and 32k:
# speed of light, occupancy, warp stalls, one launch each.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r76; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for L in 4096 32768; do
  MOSAIC_CUDA_GRAPHS=0 timeout 200 ncu --clock-control none --kernel-name regex:partials_from_logits --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    src/cli/mosaic bench step --model $M --seq-len $L --repeats 1 --warmup 0 > $R/ncu-fold-$L.txt 2>&1
done
