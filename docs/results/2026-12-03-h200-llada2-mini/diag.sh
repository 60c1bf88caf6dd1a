set -e
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=gpu-bundle/mosaic
cd /tmp
for cfg in "all:--experts 4 --experts-per-token 4 --groups 1 --topk-groups 1" "k1:--experts 8 --experts-per-token 1 --groups 1 --topk-groups 1" "tiny:" "noshared:--shared-experts 0" "dense:--dense-layers 3"; do
  name=${cfg%%:*}; flags=${cfg#*:}
  rm -rf m_$name; $OLDPWD/$M make-test-model --family llada2 --preset tiny $flags --seed 21 --out m_$name --quiet
  ids=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1000)) for _ in range(64)))")
  rows=$(python3 -c "print(','.join(str(i) for i in range(64)))")
  for d in cpu cuda; do $OLDPWD/$M forward --model m_$name --device $d --block-length 16 --ids $ids --rows $rows --logits-out m_$name/$d.npy > /dev/null; done
  python3 - m_$name <<'PY'
import numpy as np, sys
d=sys.argv[1]; a=np.load(d+'/cpu.npy'); b=np.load(d+'/cuda.npy')
e=np.sqrt(((a-b)**2).sum(1)/(a**2).sum(1)); print(d, 'median %.2e p90 %.2e max %.2e beyond2e-2 %d/%d' % (np.median(e), np.percentile(e,90), e.max(), (e>2e-2).sum(), len(e)))
PY
done
