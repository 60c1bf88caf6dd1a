#!/usr/bin/env bash
# Trains the D2F LoRA adapter for the built-in model on the GPU machine; one command, about
# MINUTES + 1 minutes.
#
#   tools/train/run_d2f_on_gpu.sh            # carry tools/train/data (made by prepare.sh)
#
# Writes $OUT/d2f/ (OUT defaults to tools/train/out): adapter/ (the PEFT folder:
# adapter_config.json, adapter_model.safetensors, README.md), results.json, log.csv,
# eval.csv, gpu.txt, train.log. MINUTES (default 5.0) bounds the training part by wall
# clock, counted from Python's start; the final evaluation and export take seconds more.
# Extra arguments go to train_d2f.py (e.g. --lr 3e-3, --rank 32, --steps N).
set -euo pipefail
TRAINER=train_d2f.py PART=d2f MINUTES="${MINUTES:-5.0}" exec "$(dirname "$0")/run_on_gpu.sh" "$@"
