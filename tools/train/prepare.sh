#!/usr/bin/env bash
# Prepares, on Debian 12 (no GPU needed), everything the GPU training run reads:
#   tools/train/data/corpus/     KJV text split by book + corpus.json (package, version, license)
#   tools/train/data/tokenizer/  tokenizer.json + tokenizer_config.json (byte-level BPE, 4096 ids)
#   tools/train/data/tokens/     uint16 token ids per split, encoded sample prompts
# then checks Mosaic's C++ tokenizer against the Python one on the whole corpus, when a
# mosaic binary exists (MOSAIC=path, default build/src/cli/mosaic).
# Installs missing Debian packages with scripts/install-deps.sh (apt-get, root or sudo).
set -euo pipefail
cd "$(dirname "$0")/../.."

scripts/install-deps.sh bible-kjv bible-kjv-text python3 python3-numpy python3-regex python3-torch python3-matplotlib

DATA=tools/train/data
/usr/bin/python3 tools/train/prepare_corpus.py --out "$DATA/corpus"
/usr/bin/python3 tools/train/train_tokenizer.py --corpus "$DATA/corpus" --out "$DATA" \
  --vocab-size 4096 --max-length 256

MOSAIC="${MOSAIC:-build/src/cli/mosaic}"
if [ -x "$MOSAIC" ]; then
  /usr/bin/python3 tools/train/check_tokenizer.py --data "$DATA" --mosaic "$MOSAIC"
else
  echo "prepare: no $MOSAIC; skipped the C++ tokenizer check (build mosaic, then run" \
       "tools/train/check_tokenizer.py --mosaic PATH)"
fi
du -sh "$DATA"
echo "prepare: done. Carry $DATA to the GPU machine and run tools/train/run_on_gpu.sh there."
