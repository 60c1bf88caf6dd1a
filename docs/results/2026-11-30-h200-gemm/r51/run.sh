#!/usr/bin/env bash
# Session 8, run 1: every split-K-free cuBLASLt candidate for the step's GEMM shapes, timed.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r51; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
timeout 400 gpu-bundle/dev/gemm_algos 2 > $R/gemm_algos.txt 2>&1
cd $OUT && tar czf r51.tgz r51 && rm -rf r51
