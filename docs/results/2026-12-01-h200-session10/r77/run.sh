#!/usr/bin/env bash
# Session 10, run 6: the LM head's greedy fold. GPU tests, then LLaDA-8B steps against the tree
# before it (base: r75's binary), alternating, two rounds, an op profile of each at 4k and 32k,
# and Dream-7B one round.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r77; mkdir -p $R
cd gpu-bundle
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
ab() {  # family model rounds lengths
  for round in $(seq $3); do
    for v in base greedy-fold; do
      bin=src/cli/mosaic; [ $v = base ] && bin=base/mosaic
      echo "== $1 $v round $round" >> $R/ab.txt
      timeout 100 $bin bench step --model $2 --seq-len $4 >> $R/ab.txt 2>&1
    done
  done
}
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
ab llada $M 2 4096,16384,32768
for v in base greedy-fold; do
  bin=src/cli/mosaic; [ $v = base ] && bin=base/mosaic
  echo "== profile $v" >> $R/profile.txt
  MOSAIC_PROFILE_OPS=1 timeout 60 $bin bench step --model $M --seq-len 4096,32768 --repeats 2 --warmup 1 >> $R/profile.txt 2>&1
done
rm -rf $M
D=/tmp/mosaic-bench-dream-7b
src/cli/mosaic make-test-model --family dream --preset dream-7b --seed 1 --out $D --quiet
ab dream $D 1 4096,32768
