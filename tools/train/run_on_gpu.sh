#!/usr/bin/env bash
# Trains Mosaic's default model on the GPU machine; one command, about 4 minutes.
#
#   tools/train/run_on_gpu.sh            # carry tools/train/data (made by prepare.sh)
#
# Writes $OUT/train/ (OUT defaults to tools/train/out): model/ (the Hugging Face LLaDA
# folder), results.json, log.csv, eval.csv, loss.png, samples.txt, train.log.
# MINUTES (default 3.0) bounds the training part by wall clock, counted from Python's
# start; evaluation, export and samples take about 30 s more. Extra arguments go to train.py.
# TRAINER (default train.py) and PART (default train: the folder under $OUT) let another
# trainer of tools/train run the same way (run_d2f_on_gpu.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-tools/train/out}"
PYTHON="${PYTHON:-python3}"
DATA=tools/train/data
if [ ! -f "$DATA/tokens/train.npy" ]; then
  echo "$(basename "$0"): $DATA/tokens/train.npy is missing: run tools/train/prepare.sh on the" \
       "Debian machine and carry $DATA" >&2
  exit 1
fi
TRAINER="${TRAINER:-train.py}" PART="${PART:-train}"
mkdir -p "$OUT/$PART"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } > "$OUT/$PART/gpu.txt" 2>&1
"$PYTHON" -u "tools/train/$TRAINER" --data "$DATA" --out "$OUT/$PART" \
  --minutes "${MINUTES:-3.0}" "$@" 2>&1 | tee "$OUT/$PART/train.log"
