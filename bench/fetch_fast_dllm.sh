#!/usr/bin/env bash
# Fetches NVlabs/Fast-dLLM's LLaDA code at the commit the cached-decoding baseline was measured
# with into an ignored folder (default .fastdllm/), for bench/reference/fast_dllm_dual.py. Nothing
# of it is committed or changed.
#
#   bench/fetch_fast_dllm.sh [DEST] [SOURCE]
#
# SOURCE: a clone URL or a local git directory holding that commit (default: NVlabs on GitHub).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.fastdllm}
source=${2:-https://github.com/NVlabs/Fast-dLLM.git}
commit=a9b81e4caa240c8cad4f7dc1889ff4852a0fca5b  # upstream, 2026-05-30
rm -rf "$dest"
mkdir -p "$dest"
git --git-dir="$(git clone --bare --quiet "$source" "$dest/repo.git" >/dev/null && echo "$dest/repo.git")" \
  archive "$commit" v1/llada | tar -x -C "$dest"
rm -rf "$dest/repo.git"
echo "Fast-dLLM $commit: $dest/v1/llada"
