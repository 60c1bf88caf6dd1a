#!/usr/bin/env bash
# Session 9, run 10: the GEMM workbench with v5 (persistent, epilogue warps), one round.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
mkdir -p $OUT/r70; timeout 120 gpu-bundle/dev/gemm_wgmma 1 2>&1 | tee $OUT/r70/gemm_wgmma.txt
