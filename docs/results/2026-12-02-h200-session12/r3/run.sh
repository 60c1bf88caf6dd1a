#!/usr/bin/env bash
# Session 12, run 3: Fast-dLLM's own dual cache (harness loading the model itself), and where a
# served step's time goes (16 requests, exact block cache, per-op GPU times and step wall times).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/r3; mkdir -p $R
B=$PWD/gpu-bundle/src/cli/mosaic
M=/tmp/mosaic-bench-llada-8b
$B make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
timeout 330 python3 bench/reference/fast_dllm_dual.py --fast-dllm .fastdllm/v1/llada --model $M --prompt-len 1024 \
  --batch 1,8 --json $R/fast-dllm.json > $R/fast-dllm.txt 2>&1; echo "fast-dllm exit $?"
grep -v "Warning\|warn(" $R/fast-dllm.txt | tail -12
K=/tmp/block; mkdir -p $K
python3 -c "import json;c=json.load(open('$M/config.json'));c['block_attention']='prompt';json.dump(c,open('$K/config.json','w'))"
ln -sf $M/model.safetensors $K/model.safetensors
MOSAIC_PROFILE_OPS=1 $B serve --model $K --port 8411 --gen-length 256 --steps 256 --max-gen-length 256 > $R/serve-profile.log 2>&1 &
S=$!
for _ in $(seq 90); do curl -sf http://127.0.0.1:8411/health >/dev/null && break; sleep 1; done
timeout 150 python3 bench/load/serve_load.py --url http://127.0.0.1:8411 --concurrency 16 --requests 16 --duration 120 \
  --max-tokens 256 --steps 256 --block-length 32 --token-prompts 512 --prompts 4 --no-reference > $R/load.txt 2>&1
cat $R/load.txt | tail -4
curl -s http://127.0.0.1:8411/metrics | grep -E "^mosaic_step_seconds_(sum|count)|^mosaic_step_requests_(sum|count)" | tee $R/metrics.txt
kill $S; wait $S
grep "mosaic profile" $R/serve-profile.log | awk '{print $4}' | sort -n | awk '{a[NR]=$1} END {print "GPU ms per step: n", NR, "median", a[int(NR/2)+1]}'
grep "mosaic profile" $R/serve-profile.log | sed -n '300p;600p'
tar czf $OUT/r3.tgz -C /tmp r3
