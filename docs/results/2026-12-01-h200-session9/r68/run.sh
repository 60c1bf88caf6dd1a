#!/usr/bin/env bash
# Session 9, run 8: the GEMM workbench (dev/cuda/gemm_wgmma.cu at this run's variants), two rounds.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
mkdir -p $OUT/r68; timeout 250 gpu-bundle/dev/gemm_wgmma 2 2>&1 | tee $OUT/r68/gemm_wgmma.txt
