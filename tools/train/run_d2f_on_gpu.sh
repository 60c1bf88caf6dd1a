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
cd "$(dirname "$0")/../.."
OUT="${OUT:-tools/train/out}"
PYTHON="${PYTHON:-python3}"
DATA=tools/train/data
if [ ! -f "$DATA/tokens/train.npy" ]; then
  echo "run_d2f_on_gpu: $DATA/tokens/train.npy is missing: run tools/train/prepare.sh on the" \
       "Debian machine and carry $DATA" >&2
  exit 1
fi
mkdir -p "$OUT/d2f"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } > "$OUT/d2f/gpu.txt" 2>&1
"$PYTHON" -u tools/train/train_d2f.py --data "$DATA" --out "$OUT/d2f" \
  --minutes "${MINUTES:-5.0}" "$@" 2>&1 | tee "$OUT/d2f/train.log"
