#!/usr/bin/env bash
# Trains Mosaic's default model on the GPU machine; one command, about 4 minutes.
#
#   tools/train/run_on_gpu.sh            # carry tools/train/data (made by prepare.sh)
#
# Writes $OUT/train/ (OUT defaults to tools/train/out): model/ (the Hugging Face LLaDA
# folder), results.json, log.csv, eval.csv, loss.png, samples.txt, train.log.
# MINUTES (default 3.0) bounds the training part by wall clock, counted from Python's
# start; evaluation, export and samples take about 30 s more. Extra arguments go to train.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-tools/train/out}"
PYTHON="${PYTHON:-python3}"
DATA=tools/train/data
if [ ! -f "$DATA/tokens/train.npy" ]; then
  echo "run_on_gpu: $DATA/tokens/train.npy is missing: run tools/train/prepare.sh on the" \
       "Debian machine and carry $DATA" >&2
  exit 1
fi
mkdir -p "$OUT/train"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } > "$OUT/train/gpu.txt" 2>&1
"$PYTHON" -u tools/train/train.py --data "$DATA" --out "$OUT/train" \
  --minutes "${MINUTES:-3.0}" "$@" 2>&1 | tee "$OUT/train/train.log"
