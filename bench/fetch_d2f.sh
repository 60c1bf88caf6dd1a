#!/usr/bin/env bash
# Fetches D2F's inference code (zhijie-group/Discrete-Diffusion-Forcing) at the commit the D2F
# characterization was measured with into an ignored folder (default .d2f/), for
# bench/reference/d2f_reference.py. Nothing of it is committed or changed.
#
#   bench/fetch_d2f.sh [DEST] [SOURCE]
#
# SOURCE: a clone URL or a local git directory holding that commit (default: GitHub).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.d2f}
source=${2:-https://github.com/zhijie-group/Discrete-Diffusion-Forcing.git}
commit=771f745f6770230dd6ea6a283519b31c5d57e6ed  # "fix_attention_mask", 2025-08-21
rm -rf "$dest"
mkdir -p "$dest"
if [ -d "$source" ]; then git_dir=$source; else git clone --bare --quiet "$source" "$dest/repo.git"; git_dir=$dest/repo.git; fi
git --git-dir="$git_dir" archive "$commit" D2F-eval | tar -x -C "$dest"
rm -rf "$dest/repo.git"
echo "D2F $commit: $dest/D2F-eval"
