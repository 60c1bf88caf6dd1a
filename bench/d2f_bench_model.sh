# Sourced by the D2F benchmarks (d2f_characterization.sh, d2f_serving.sh) with $mosaic and $here
# set: the model and adapter they share, written once per machine. LLaDA-8B's configuration with
# random bf16 weights and a random rank-32 adapter on q, k, v, attn_out.
model=${MOSAIC_BENCH_MODEL_DIR:-/tmp/mosaic-bench-llada-8b}
adapter=${MOSAIC_BENCH_ADAPTER_DIR:-/tmp/mosaic-bench-llada-8b-d2f-lora}
if [ ! -f "$model/config.json" ]; then
  echo "== writing a random llada-8b checkpoint to $model"
  "$mosaic" make-test-model --family llada --preset llada-8b --seed 1 --out "$model" --quiet
fi
if [ ! -f "$adapter/adapter_config.json" ]; then
  echo "== writing a random rank-32 adapter (q, k, v, attn_out) to $adapter"
  python3 "$here/../tests/reference/make_lora_adapter.py" --base "$model" --out "$adapter" --rank 32 --alpha 32 \
    --targets q_proj,k_proj,v_proj,attn_out --dtype BF16 --seed 2
fi
