#!/usr/bin/env bash
# D2F's characterization side by side (bench/d2f_characterization.sh): D2F's own decoder, then
# Mosaic at batch 1, 4, 16, 32, with the host's share of each Mosaic generation at most.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
D2F_DIR=$PWD/.d2f/D2F-eval timeout 560 bash bench/d2f_characterization.sh gpu-bundle/mosaic $OUT/d2f 2>&1 | grep -v -i warn | tail -60
