#!/usr/bin/env bash
# D2F's characterization side by side in one command (bench/d2f_characterization.sh, without the
# profiled reference run): D2F's own decoder, then Mosaic (wider small-rows stages) at batch 1, 4,
# 16, 32, with the host's share of each Mosaic generation at most.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
D2F_DIR=$PWD/.d2f/D2F-eval timeout 500 bash bench/d2f_characterization.sh gpu-bundle/mosaic $OUT/d2f 2>&1 | grep -v -i warn | tail -40
