#!/usr/bin/env bash
# Session 10, run 7: the final tree (greedy fold in the LM head; fused SwiGLU opt-in, off): Mosaic
# and the PyTorch reference side by side (LLaDA-8B, Dream-7B; no L_max search).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r78; mkdir -p $R
for family in llada dream; do
  timeout 270 bash bench/side_by_side.sh $PWD/gpu-bundle/src/cli/mosaic $R/$family $family 4096,16384,32768 none > $R/side-$family.txt 2>&1
  echo "$family rc=$?" >> $R/summary.txt
  rm -rf /tmp/mosaic-bench-*
done
