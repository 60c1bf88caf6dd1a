#!/usr/bin/env bash
# D2F on the H200: CUDA vs CPU tokens on a tiny model, then the characterization.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:${LD_LIBRARY_PATH:-}
M=$PWD/gpu-bundle/build-gpu/src/cli/mosaic
export NCCL_NVLS_ENABLE=0
python3 -c "import importlib; [print(n, bool(importlib.util.find_spec(n))) for n in ('lm_eval','accelerate','datasets','jinja2','peft','transformers')]"
T=/tmp/d2f-tiny; rm -rf $T; mkdir -p $T
$M make-test-model --family llada --preset tiny --layers 2 --hidden 128 --heads 2 --kv-heads 2 --ffn 256 --vocab 1030 --dtype bf16 --seed 3 --out $T/base --quiet
python3 tests/reference/make_lora_adapter.py --base $T/base --out $T/lora --rank 8 --alpha 16 --targets q_proj,k_proj,v_proj,attn_out --seed 4
for dev in cpu cuda; do
  $M generate --model $T/base --adapter $T/lora --ids 5,6,7,8,9,10,11 --ids 12,13,14 --gen-length 64 --block-length 16 --d2f \
    --skip-threshold 0.05 --block-add-threshold 0.25 --decoded-token-threshold 0.5 --device $dev --json > $OUT/tiny-$dev.json
  $M generate --model $T/base --adapter $T/lora --ids 5,6,7,8,9,10,11 --gen-length 64 --block-length 16 --d2f \
    --device $dev --json > $OUT/tiny-char-$dev.json
done
python3 - <<'PY'
import json, os
o = os.environ["OUT"]
for name in ("tiny", "tiny-char"):
    c = json.load(open(f"{o}/{name}-cpu.json"))["results"]; g = json.load(open(f"{o}/{name}-cuda.json"))["results"]
    for i, (a, b) in enumerate(zip(c, g)):
        same = sum(x == y for x, y in zip(a["output_ids"], b["output_ids"]))
        print(f"{name} request {i}: cuda = cpu tokens {same}/{len(a['output_ids'])}, steps cpu {a['steps']} cuda {b['steps']}, forwards {a['forwards']} {b['forwards']}")
PY
timeout 470 bench/d2f_characterization.sh $M $OUT/char mosaic,reference
