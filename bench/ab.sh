#!/usr/bin/env bash
# Times two builds of attn alternately on the same machine, minutes apart: the way to tell a
# change's effect from a shared host's noise. JSON lines on stdout, one per measurement, tagged
# with the side (a or b), the round and what was measured.
#   bench/ab.sh OLD/attn NEW/attn [ROUNDS=3] > ab.jsonl
# Measures (2 threads): causal forward T = 256, 1024, 4096; causal backward T = 1024, 4096; the
# multi-head block at the GPT's attention shape; decode at caches of 1k and 64k; and the GPT
# training step (`attn train` defaults, 150 steps, ms/iter) on tinyshakespeare.
set -euo pipefail
(($# >= 2)) || { echo "usage: bench/ab.sh OLD_ATTN NEW_ATTN [ROUNDS]" >&2; exit 2; }
corpus=${CORPUS:-$(dirname "$0")/../../shared/data/tinyshakespeare.txt}
[[ -f $corpus ]] || { echo "bench/ab.sh: no corpus at $corpus (set CORPUS)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "${3:-3}"); do
  for side in a b; do
    bin=$([[ $side == a ]] && echo "$1" || echo "$2")
    tag() { sed "s/^{/{\"side\": \"$side\", \"round\": $round, \"what\": \"$1\", /"; }
    "$bin" bench forward --seq 256,1024,4096 --threads 2 --causal --json --runs 5 \
      --reference-max-seq 0 | grep '^{' | tag forward
    "$bin" bench backward --seq 1024,4096 --threads 2 --causal --json --runs 3 \
      --reference-max-seq 0 | grep '^{' | tag backward
    "$bin" bench forward --seq 64 --batch 12 --heads 4 --head-dim 32 --causal --block \
      --threads 2 --json --runs 20 --reference-max-seq 0 | grep '^{' | tag block
    "$bin" bench decode --cache 1024,65536 --threads 2 --json --runs 20 | grep '^{' | tag decode
    rm -rf "$work/run"
    "$bin" train --corpus "$corpus" --out "$work/run" --max-iters 150 --eval-interval 1000 \
      --eval-iters 1 > "$work/train.log" 2>&1
    ms=$(grep -o '[0-9.]* ms/iter' "$work/train.log" | tail -1 | cut -d' ' -f1)
    echo "{\"side\": \"$side\", \"round\": $round, \"what\": \"gpt\", \"ms\": $ms}"
  done
done
