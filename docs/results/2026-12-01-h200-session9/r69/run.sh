#!/usr/bin/env bash
# Session 9, run 9: the GEMM workbench with v4 (persistent ping-pong), one round.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
mkdir -p $OUT/r69; timeout 110 gpu-bundle/dev/gemm_wgmma 1 2>&1 | tee $OUT/r69/gemm_wgmma.txt
