#!/usr/bin/env bash
# Mosaic's main job on its built-in default: generate text with the built-in model
# (models/kjv-llada-12m, a small LLaDA trained on the King James Bible; docs/default-model.md),
# showing the canvas as the masks resolve. Extra arguments go to `mosaic generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
build/src/cli/mosaic generate --prompt "And it came to pass" --gen-length 64 --steps 64 \
  --block-length 32 --visual "$@"
