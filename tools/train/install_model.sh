#!/usr/bin/env bash
# After the GPU run, on the Debian machine: installs the trained model into the repository
# and checks it against Mosaic.
#
#   tools/train/install_model.sh RUN_DIR     # RUN_DIR = the run's $OUT/train (files_at/.../train)
#
# 1. copies RUN_DIR/model to models/kjv-llada-12m (replacing it),
# 2. redraws the loss plot with matplotlib if the GPU machine had none (loss.svg only),
#    and copies it to docs/default-model-loss.png,
# 3. fills the results section of docs/default-model.md and the model card from results.json,
# 4. runs check_export.py (loads in Mosaic, logits vs PyTorch, generate, size) and
#    check_tokenizer.py (Python vs C++ tokenizer on the whole corpus, if tools/train/data is here).
# MOSAIC=path selects the binary (default build/src/cli/mosaic).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN="${1:?usage: tools/train/install_model.sh RUN_DIR, the \$OUT/train folder of the run}"
NAME="${MODEL_NAME:-kjv-llada-12m}"
MOSAIC="${MOSAIC:-build/src/cli/mosaic}"
[ -f "$RUN/results.json" ] || { echo "install_model: $RUN/results.json missing" >&2; exit 1; }

rm -rf "models/$NAME"
mkdir -p models
cp -r "$RUN/model" "models/$NAME"
chmod -R u+w "models/$NAME"
if [ ! -f "$RUN/loss.png" ]; then
  /usr/bin/python3 tools/train/plot_loss.py --run "$RUN" --out /tmp/mosaic-default-model-loss
  cp /tmp/mosaic-default-model-loss.png docs/default-model-loss.png
else
  cp "$RUN/loss.png" docs/default-model-loss.png
fi
/usr/bin/python3 tools/train/model_card.py --run "$RUN" --doc docs/default-model.md \
  --model-dir "models/$NAME"
cp "$RUN/results.json" docs/default-model-results.json
/usr/bin/python3 tools/train/check_export.py --model "models/$NAME" --mosaic "$MOSAIC"
if [ -f tools/train/data/tokens/train.npy ]; then
  /usr/bin/python3 tools/train/check_tokenizer.py --tokenizer "models/$NAME/tokenizer.json" \
    --mosaic "$MOSAIC"
fi
du -sh "models/$NAME"
