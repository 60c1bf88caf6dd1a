#!/usr/bin/env bash
# Session 12, run 4: the GPU tests once more, Fast-dLLM's own dual cache and Mosaic's in the same
# command, and the exact block cache's 32k generation on a block-causal copy of the checkpoint.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/r4; mkdir -p $R
B=$PWD/gpu-bundle/src/cli/mosaic
for t in src/backend/cuda/mosaic_backend_cuda_test src/mem/mosaic_mem_test tests/gpu/mosaic_gpu_test; do
  echo "== $t" >> $R/tests.txt
  timeout 200 gpu-bundle/$t --gtest_brief=1 >> $R/tests.txt 2>&1; echo "exit $?" >> $R/tests.txt
done
grep -E "PASSED|FAILED|exit" $R/tests.txt
M=/tmp/mosaic-bench-llada-8b
$B make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
timeout 400 bench/cached_decoding.sh $B $R fastdllm 2>&1 | grep -v "Warning\|warn(\|Loading" | tee $R/bench.txt
K=/tmp/block; mkdir -p $K
python3 -c "import json;c=json.load(open('$M/config.json'));c['block_attention']='prompt';json.dump(c,open('$K/config.json','w'))"
ln -sf $M/model.safetensors $K/model.safetensors
timeout 120 $B bench generate --model $K --prompt-len 32768 --cache auto --json-out $R/generate-block.json 2>&1 | tee -a $R/bench.txt
tar czf $OUT/r4.tgz -C /tmp r4
