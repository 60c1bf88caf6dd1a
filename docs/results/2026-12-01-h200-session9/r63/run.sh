#!/usr/bin/env bash
# Session 9, run 3: the attention tail's size (256, 512, 1024 rows) against e7cdf69 (base),
# LLaDA-8B two rounds and Dream-7B one round, 16k and 32k, alternating.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r63; mkdir -p $R
cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
bench() {  # family model rounds
  for round in $(seq $3); do
    for v in base t256 t512 t1024; do
      bin=$v/mosaic; [ $v = t1024 ] && bin=src/cli/mosaic
      echo "== $1 $v round $round" >> $R/ab.txt
      timeout 100 $bin bench step --model $2 --seq-len 16384,32768 >> $R/ab.txt 2>&1
    done
  done
}
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
bench llada $M 2
rm -rf $M
D=/tmp/mosaic-bench-dream-7b
src/cli/mosaic make-test-model --family dream --preset dream-7b --seed 1 --out $D --quiet
bench dream $D 1
cd $OUT && tar czf r63.tgz r63 && rm -rf r63
