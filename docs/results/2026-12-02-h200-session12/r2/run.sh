#!/usr/bin/env bash
# Session 12, run 2: where the cached 4k step's time goes (per op kind, GEMM choices), Fast-dLLM's
# own dual cache beside Mosaic's, and serving 16 concurrent requests with each cache.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/r2; mkdir -p $R
B=gpu-bundle/src/cli/mosaic
M=/tmp/mosaic-bench-llada-8b
$B make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
MOSAIC_LOG=info MOSAIC_PROFILE_OPS=1 timeout 90 $B bench step --model $M --seq-len 4096 --masked 32 --cache dual \
  --repeats 2 --warmup 1 > $R/profile.txt 2>&1
grep -vE "^\s*$" $R/profile.txt | tail -45
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
timeout 420 bench/cached_decoding.sh $B $R fastdllm,serve 2>&1 | tee $R/bench.txt
tar czf $OUT/r2.tgz -C /tmp r2
