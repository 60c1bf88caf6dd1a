#!/usr/bin/env bash
# Mosaic's main job on its built-in default: write a tiny random LLaDA checkpoint, then run the
# mask-only forward on a sequence with masked positions and show what it predicts there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
model="${MOSAIC_DEMO_MODEL:-$PWD/.cache/demo-llada-tiny}"
if [ ! -f "$model/config.json" ]; then
  build/src/cli/mosaic make-test-model --family llada --preset tiny --seed 7 --quiet --out "$model"
fi
mask=$(sed -n 's/.*"mask_token_id": *\([0-9]*\).*/\1/p' "$model/config.json")
build/src/cli/mosaic info --model "$model"
build/src/cli/mosaic forward --model "$model" --ids "11,42,7,$mask,$mask,$mask,99" \
  --ids "5,$mask,8" "$@"
