#!/usr/bin/env bash
# Replay padding (rows in position order; eager captures while they pay off), one command: the
# GPU tests it touches, then
# D2F's characterization (bench/d2f_characterization.sh: D2F's own decoder, Mosaic at batch 1, 4,
# 16, 32), then Mosaic at batch 1 with padding off and on again (MOSAIC_REPLAY_PADDING=0 / 1).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
timeout 200 gpu-bundle/mosaic_gpu_test --gtest_filter='CudaStepGraphs*:*CachedGenerations*:*RepeatedSteps*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure|graph replays" | tail -60
D2F_DIR=$PWD/.d2f/D2F-eval timeout 420 bash bench/d2f_characterization.sh gpu-bundle/mosaic $OUT/d2f 2>&1 |
  grep -v -i warn | grep -E "==|seconds|speedup|tokens/s|host|batch" | tail -30
model=/tmp/mosaic-bench-llada-8b adapter=/tmp/mosaic-bench-llada-8b-d2f-lora
for pad in 0 1 0 1; do
  MOSAIC_REPLAY_PADDING=$pad timeout 60 gpu-bundle/mosaic bench generate --model $model --adapter $adapter \
    --prompt-len 256 --gen-length 512 --block-length 32 --d2f --block-add-threshold 0.5 \
    --decoded-token-threshold 0.9 --skip-threshold 1.0 --cache auto --batch 1 \
    --json-out $OUT/d2f/mosaic-d2f-b1-pad$pad-$RANDOM.json > /dev/null 2>&1
done
python3 - "$OUT/d2f" <<'PY'
import json, glob, os, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f))
    if isinstance(d.get("runs"), list) and d["runs"] and "prompt_length" in d["runs"][0]:
        for r in d["runs"]:
            print(f"{os.path.basename(f):36s} {r['seconds']:8.3f} s  steps {r['steps']}  host<= {r.get('host_share_at_most', 0):.3f}"
                  f"  fwd_host {r.get('forward_host_seconds', 0):.3f}")
    else:
        print(os.path.basename(f), {k: v for k, v in d.items() if not isinstance(v, (list, dict))})
PY
