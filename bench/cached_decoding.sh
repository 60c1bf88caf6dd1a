#!/usr/bin/env bash
# Cached decoding on one GPU (docs/PERFORMANCE.md, "Cached decoding"), each part beside its
# baseline in the same run, LLaDA-8B's configuration with random bf16 weights:
#   step      one 32-token block against a 4k (and 32k) context: the dual-cache step vs the full step
#   generate  256 tokens (block 32, 256 steps) after a 32,768-token prompt: none vs prefix vs dual
#             (none stopped after one block of 32 steps: a full step is the same work every step)
#   fastdllm  Fast-dLLM's own dual-cache generation (bench/reference/fast_dllm_dual.py, fetched by
#             bench/fetch_fast_dllm.sh) vs Mosaic's, same prompt, block and step counts, batch 1 and 8
#   serve     16 concurrent requests (prompt 512, 256 tokens, block 32, one token per step) against
#             mosaic serve with the dual cache, and with the exact block cache of a block-causal copy
#
#   bench/cached_decoding.sh MOSAIC OUT_DIR [PARTS]      # PARTS: comma-separated, default all
set -euo pipefail
mosaic=$(realpath "$1") out=$2 parts=${3:-step,generate,fastdllm,serve}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
has() { [[ ",$parts," == *",$1,"* ]]; }
model=${MOSAIC_BENCH_MODEL_DIR:-/tmp/mosaic-bench-llada-8b}
if [ ! -f "$model/config.json" ]; then
  echo "== writing a random llada-8b checkpoint to $model"
  "$mosaic" make-test-model --family llada --preset llada-8b --seed 1 --out "$model" --quiet
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee "$out/gpu.txt"

if has step; then
  echo "== step: one 32-token block against its context, dual cache vs the full step"
  "$mosaic" bench step --model "$model" --seq-len 4096,32768 --masked 32 --cache dual --json-out "$out/step-dual.json"
  "$mosaic" bench step --model "$model" --seq-len 4096,32768 --masked 32 --json-out "$out/step-full.json"
fi

if has generate; then
  echo "== generate: 256 tokens after a 32,768-token prompt"
  "$mosaic" bench generate --model "$model" --prompt-len 32768 --cache dual,prefix --json-out "$out/generate-cached.json"
  "$mosaic" bench generate --model "$model" --prompt-len 32768 --cache none --stop-after 32 \
    --json-out "$out/generate-none.json"
fi

if has fastdllm; then
  echo "== Fast-dLLM's dual cache vs Mosaic's: prompt 1024, 256 tokens, block 32, 256 steps"
  python3 "$here/reference/fast_dllm_dual.py" --fast-dllm "${FAST_DLLM_DIR:-.fastdllm/v1/llada}" --model "$model" \
    --prompt-len 1024 --batch 1,8 --json "$out/fast-dllm.json" 2>&1 | grep -v Warning || true
  for batch in 1 8; do
    "$mosaic" bench generate --model "$model" --prompt-len 1024 --cache dual --batch $batch \
      --json-out "$out/mosaic-dual-b$batch.json"
  done
fi

if has serve; then
  block_causal=/tmp/mosaic-bench-llada-8b-block
  mkdir -p "$block_causal"
  python3 - "$model" "$block_causal" <<'PY'
import json, os, sys
src, dst = sys.argv[1:]
config = json.load(open(os.path.join(src, "config.json")))
config["block_attention"] = "prompt"   # the D2F layout: the weights are the same files
json.dump(config, open(os.path.join(dst, "config.json"), "w"), indent=2)
for name in os.listdir(src):
    if name.endswith(".safetensors") or name.endswith(".index.json"):
        target = os.path.join(dst, name)
        if not os.path.exists(target):
            os.symlink(os.path.join(src, name), target)
PY
  for variant in dual block; do
    folder=$([ $variant = dual ] && echo "$model" || echo "$block_causal")
    cache=$([ $variant = dual ] && echo dual || echo auto)
    port=$((8300 + RANDOM % 500))
    "$mosaic" serve --model "$folder" --port $port --cache $cache --gen-length 256 --steps 256 \
      --max-gen-length 256 > "$out/serve-$variant.log" 2>&1 &
    server=$!
    for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 1; done
    echo "== serve ($variant): 16 concurrent requests, prompt 512, 256 tokens, block 32, one token a step"
    python3 "$here/load/serve_load.py" --url "http://127.0.0.1:$port" --concurrency 16 --requests 32 \
      --duration 300 --max-tokens 256 --steps 256 --block-length 32 --token-prompts 512 --prompts 4 \
      --json "$out/serve-$variant.json"
    curl -s "http://127.0.0.1:$port/metrics" | grep -E "^mosaic_(kv_cache|tokens_per_second|batch)" \
      > "$out/serve-$variant-metrics.txt" || true
    kill $server; wait $server 2>/dev/null || true
  done
fi
