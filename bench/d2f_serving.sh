#!/usr/bin/env bash
# D2F served under Poisson arrivals (issue 24; docs/PERFORMANCE.md, "D2F served"): LLaDA-8B's
# configuration with random bf16 weights and a random rank-32 adapter on q, k, v, attn_out, D2F
# decoding with the characterization's settings (block 32, block-add 0.5, decoded-token 0.9,
# skip 1.0, greedy), 256-token prompts, 128 tokens each. Capacity is measured once, with 16
# closed-loop clients on the continuous scheduler; then Poisson arrivals at 0.5, 1 and 2 times
# that rate go to the continuous scheduler and to fixed batching (--batching fixed
# --batch-timeout auto), the same offered loads for both. Each answer is checked token for token
# against a solo run of its prompt (bench/load/serve_load.py).
#
#   bench/d2f_serving.sh MOSAIC OUT_DIR
set -euo pipefail
mosaic=$(realpath "$1") out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/d2f_bench_model.sh"
load=(--max-tokens 128 --steps 10000 --token-prompts 256 --prompts 8 --requests ${REQUESTS:-48}
      --duration ${DURATION:-40} --timeout 120)

serve() {  # serve MODE LOG: starts the server, sets $server and $port
  port=$((8300 + RANDOM % 500))
  local extra=()
  [ "$1" = fixed ] && extra=(--batching fixed --batch-timeout auto)
  "$mosaic" serve --model "$model" --adapter "$adapter" --port $port --d2f --block-add-threshold 0.5 \
    --decoded-token-threshold 0.9 --skip-threshold 1.0 "${extra[@]}" > "$2" 2>&1 &
  server=$!
  for _ in $(seq 180); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0; sleep 1; done
  echo "the server did not start"; tail -n 20 "$2"; return 1
}

echo "== continuous batching: capacity (16 closed-loop clients), then Poisson at 0.5x, 1x, 2x"
serve continuous "$out/serve-continuous.log"
python3 "$here/load/serve_load.py" --url "http://127.0.0.1:$port" --capacity-concurrency 16 --overload 0.5,1,2 \
  "${load[@]}" --json "$out/continuous.json" || true
curl -s "http://127.0.0.1:$port/metrics" | grep -E "^mosaic_(batch|tokens_per_second|step)" > "$out/continuous-metrics.txt" || true
kill $server; wait $server 2>/dev/null || true
rates=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); c=s[0]['throughput_rps']; print(','.join(f'{m*c:.4f}' for m in (0.5,1,2)))" "$out/continuous.json")

echo "== fixed batching (batch timeout auto): Poisson at the same rates ($rates /s)"
serve fixed "$out/serve-fixed.log"
python3 "$here/load/serve_load.py" --url "http://127.0.0.1:$port" --rate "$rates" "${load[@]}" \
  --json "$out/fixed.json" || true
curl -s "http://127.0.0.1:$port/metrics" | grep -E "^mosaic_(batch|tokens_per_second|step)" > "$out/fixed-metrics.txt" || true
kill $server; wait $server 2>/dev/null || true
