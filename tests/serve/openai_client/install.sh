#!/usr/bin/env bash
# Installs the pinned OpenAI Node SDK (package.json, package-lock.json) into <repo>/.cache/openai-client
# for the serve_openai_client conformance test. Idempotent: `npm ci` from the lock file.
#   tests/serve/openai_client/install.sh [target_dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-$here/../../../.cache/openai-client}"
mkdir -p "$target"
cp "$here/package.json" "$here/package-lock.json" "$target/"
npm ci --prefix "$target" --no-audit --no-fund --loglevel=error
echo "openai-client: $(node -p "require('$target/node_modules/openai/package.json').version") in $target"
