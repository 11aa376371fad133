#!/usr/bin/env bash
# Issue #23's kernel targets on every SIMD set this CPU runs (ATTN_SIMD caps the kernels and
# oneDNN; on an AVX-512 machine that also measures the AVX2 code), best of ROUNDS rounds: a
# shared host only ever slows a run down, so the fastest round is the least disturbed, and the
# FMA peak is the best the same rounds measured.
#   bench/simd_sets.sh [ROUNDS=3] [SETS="avx512 avx2"]
# Prints, per set: the fused forward (H = 16, d = 64; causal and not; T = 256, 1024, 4096; 1
# and 2 threads), the backward (causal, T = 1024, 4096 on 1 and 2 threads, 8192 and 16384 on
# 2: ms, × the forward, % of peak) and the multi-head block at the GPT's shape (T = 64,
# d = 32, B·H = 48; forward and backward, 1 and 2 threads). ~8 minutes a set at 3 rounds.
set -euo pipefail
shopt -s inherit_errexit
attn=${ATTN:-$(dirname "$0")/../build/release/attn}
rounds=${1:-3}
sets=${2:-avx512 avx2}
[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }

best() {  # stdin: JSON lines of one kind of measurement; $1: forward or backward
  /usr/bin/python3 -c '
import collections, json, sys
kind = sys.argv[1]
rows = collections.OrderedDict()
for line in sys.stdin:
    r = json.loads(line)
    key = (r["seq"], r["threads"])
    b = rows.setdefault(key, {"ms": 1e99, "fwd": 1e99, "gflops": 0.0, "peak": 0.0})
    b["ms"] = min(b["ms"], r["ms"])
    b["fwd"] = min(b["fwd"], r.get("forward_ms", 1e99))
    b["gflops"] = max(b["gflops"], r["useful_gflops"])
    b["peak"] = max(b["peak"], r["peak_gflops"])
for (seq, threads), b in sorted(rows.items()):
    ratio = "  %.2fx fwd" % (b["ms"] / b["fwd"]) if kind == "backward" else ""
    print("  T=%-6d %d thr  %9.2f ms  %6.1f GFLOP/s of %4.0f = %3.0f %%%s" % (
        seq, threads, b["ms"], b["gflops"], b["peak"], 100 * b["gflops"] / b["peak"], ratio))
' "$1"
}

run() {  # ATTN_SIMD, bench command and options: ROUNDS rounds of JSON lines
  local simd=$1
  shift
  for _ in $(seq "$rounds"); do
    ATTN_SIMD=$simd "$attn" bench "$@" --json --reference-max-seq 0 | grep '^{'
  done
}

shape=(--heads 16 --head-dim 64)
gpt=(--seq 64 --batch 12 --heads 4 --head-dim 32 --causal --block --threads 1,2)
for simd in $sets; do
  echo "== ATTN_SIMD=$simd ($(lscpu | sed -n 's/^Model name: *//p'))"
  echo "forward, causal"
  run "$simd" forward --seq 256,1024,4096 "${shape[@]}" --causal --threads 1,2 --runs 7 | best forward
  echo "forward, non-causal"
  run "$simd" forward --seq 256,1024,4096 "${shape[@]}" --threads 1,2 --runs 5 | best forward
  echo "backward, causal"
  {
    run "$simd" backward --seq 1024,4096 "${shape[@]}" --causal --threads 1,2 --runs 3
    run "$simd" backward --seq 8192,16384 "${shape[@]}" --causal --threads 2 --runs 1
  } | best backward
  echo "GPT's shape, multi-head block, forward"
  run "$simd" forward "${gpt[@]}" --runs 21 | best forward
  echo "GPT's shape, multi-head block, backward"
  run "$simd" backward "${gpt[@]}" --runs 21 | best backward
done
