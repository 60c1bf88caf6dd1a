#!/usr/bin/env bash
# D2F at batch 1 (LLaDA-8B + random rank-32 adapter, as bench/d2f_characterization.sh) after
# removing in-place CUDA graph updates: the cost of evicting and instantiating instead.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mosaic=$PWD/gpu-bundle/mosaic here=$PWD/bench
source bench/d2f_bench_model.sh
mkdir -p $OUT/d2f
for i in 1 2 3; do
  timeout 60 $mosaic bench generate --model $model --adapter $adapter \
    --prompt-len 256 --gen-length 512 --block-length 32 --d2f --block-add-threshold 0.5 \
    --decoded-token-threshold 0.9 --skip-threshold 1.0 --cache auto --batch 1 \
    --json-out $OUT/d2f/mosaic-d2f-b1-run$i.json > /dev/null 2>&1
done
python3 - "$OUT/d2f" <<'PY'
import json, glob, os, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    for r in json.load(open(f))["runs"]:
        print(f"{os.path.basename(f):28s} {r['seconds']:8.3f} s  steps {r['steps']}  host<= {r.get('host_share_at_most', 0):.3f}"
              f"  fwd_host {r.get('forward_host_seconds', 0):.3f}")
PY
