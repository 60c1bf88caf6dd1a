#!/usr/bin/env bash
# D2F on one GPU (docs/PERFORMANCE.md, "D2F"), beside D2F's own code in the same run: LLaDA-8B's
# configuration with random bf16 weights and a random rank-32 adapter on q, k, v, attn_out
# (tests/reference/make_lora_adapter.py), the characterization's decoding settings (block 32,
# block-add 0.5, decoded-token 0.9, skip 1.0, greedy), a 256-token prompt, 512 tokens.
#   reference  D2F's eval_llada._generate_block_single, unmodified (bench/reference/d2f_reference.py;
#              bench/fetch_d2f.sh fetches it), batch 1 (the only batch it runs)
#   mosaic     mosaic bench generate --d2f --adapter, batch 1, 4, 16, 32
#
#   bench/d2f_characterization.sh MOSAIC OUT_DIR [PARTS]    # PARTS: reference,mosaic (default both)
#   D2F_PROFILE=1 also runs the reference once under torch.profiler (minutes).
set -euo pipefail
mosaic=$(realpath "$1") out=$2 parts=${3:-reference,mosaic}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
has() { [[ ",$parts," == *",$1,"* ]]; }
source "$here/d2f_bench_model.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee "$out/gpu.txt"
settings=(--block-add-threshold 0.5 --decoded-token-threshold 0.9 --skip-threshold 1.0)

if has reference; then
  echo "== D2F's own decoder (unmodified), batch 1"
  python3 -u "$here/reference/d2f_reference.py" --d2f "${D2F_DIR:-.d2f/D2F-eval}" --model "$model" --adapter "$adapter" \
    --prompt-len 256 --gen-length 512 --block 32 "${settings[@]}" --json "$out/d2f-reference.json" ${D2F_PROFILE:+--profile} \
    > "$out/d2f-reference.log" 2>&1 || true
  grep -v -i warning "$out/d2f-reference.log" | tail -40
fi
if has mosaic; then
  for batch in 1 4 16 32; do
    echo "== Mosaic D2F, batch $batch"
    "$mosaic" bench generate --model "$model" --adapter "$adapter" --prompt-len 256 --gen-length 512 \
      --block-length 32 --d2f "${settings[@]}" --cache auto --batch $batch --json-out "$out/mosaic-d2f-b$batch.json"
  done
fi
