#!/usr/bin/env bash
# Session 9, run 7: the GEMM workbench (dev/cuda/gemm_wgmma.cu at this run's variants), two rounds.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
mkdir -p $OUT/r67; timeout 250 gpu-bundle/dev/gemm_wgmma 2 2>&1 | tee $OUT/r67/gemm_wgmma.txt
