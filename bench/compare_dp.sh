#!/usr/bin/env bash
# Data-parallel training next to one process on this machine: `mpirun -np 2 attn train` (one
# thread per rank) against `attn train --threads 2`, the baby GPT of attn train's defaults on
# the same corpus for the same steps, each run ROUNDS times in turn (the machine is shared and
# noisy: rounds alternate so both sides see the same conditions).
#
#   bench/compare_dp.sh [ITERS] [ROUNDS] [CORPUS]
#   (defaults: 300, 3 and ../shared/data/tinyshakespeare.txt; needs `make build` with MPI)
#
# Prints the median ms of one step (forward, backward, gradient sums, clipping, AdamW) of each
# round, their medians, the ratio, and the share of a data-parallel step spent waiting for the
# gradient sums after the backward pass (what the buckets started during it did not hide).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
iters=${1:-300}
rounds=${2:-3}
corpus=${3:-$here/../../shared/data/tinyshakespeare.txt}
attn=${ATTN:-$here/../build/release/attn}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }

flags=(--corpus "$corpus" --max-iters "$iters" --eval-interval 1000000 --eval-iters 1
       --report-sample-tokens 0)
median_step() {  # metrics.csv → median ms of steps 10..end
  awk -F, 'NR > 1 && $5 != "" && $1 >= 10 { print $5 }' "$1" | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'
}
median_of() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'; }

one=() many=() waits=()
for round in $(seq 1 "$rounds"); do
  rm -rf "$work/one" "$work/many"
  "$attn" train "${flags[@]}" --threads 2 --out "$work/one" >/dev/null
  mpirun --allow-run-as-root --mca btl self,vader --mca oob_tcp_if_include lo -np 2 \
    "$attn" train "${flags[@]}" --out "$work/many" >"$work/many.out"
  one+=("$(median_step "$work/one/metrics.csv")")
  many+=("$(median_step "$work/many/metrics.csv")")
  waits+=("$(sed -n 's/.*waited \([0-9.]*\) ms\/iter.*/\1/p' "$work/many.out")")
  echo "round $round: one process, 2 threads ${one[-1]} ms/step; 2 ranks x 1 thread ${many[-1]} ms/step (gradient sums waited ${waits[-1]} ms/step)"
done
m1=$(echo "${one[*]}" | median_of) m2=$(echo "${many[*]}" | median_of) w=$(echo "${waits[*]}" | median_of)
awk -v a="$m1" -v b="$m2" -v w="$w" 'BEGIN {
  printf "median: one process %.2f ms/step, 2 ranks %.2f ms/step: ratio %.3f; waiting for the gradient sums %.2f ms/step (%.1f %% of a step)\n", a, b, b / a, w, 100 * w / b }'
