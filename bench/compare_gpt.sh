#!/usr/bin/env bash
# attn's GPT trainer next to the same model in PyTorch (bench/gpt_torch.py), same corpus, same
# configuration, same number of steps, in one run.
#
#   bench/compare_gpt.sh [ITERS] [CORPUS]
#   (defaults: 200 and ../shared/data/tinyshakespeare.txt; needs `make build` and Debian's
#   python3-torch: scripts/bootstrap --bench)
#
# The model is the small character-level one of `attn train`'s defaults: 4 layers, 4 heads,
# n_embd 128, block 64, batch 12, AdamW, warm-up + cosine, clipping at 1.0. Both run on 2
# threads; PyTorch also on 1 thread and with OMP_WAIT_POLICY=passive, because its default
# OpenMP spin-wait collapses on this 2-core machine; attn also with a busy loop on the other
# core, 2 threads next to 1 (two threads should never lose). PyTorch runs both under this
# environment's OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set for old OpenBLAS builds: they pin
# its AVX2 Haswell kernel) and without them, when OpenBLAS picks its own kernel for this CPU
# (AVX-512 here, 20-30 % faster); and in mixed precision, attn with --precision bf16 next to
# PyTorch's CPU autocast to bfloat16. "PyTorch's best" is the fastest of all its rows. Each
# side reports the median ms of one
# training step (forward, backward, clipping, AdamW; data sampling and evaluation excluded);
# attn's peak resident memory comes from /usr/bin/time.
set -euo pipefail
shopt -s inherit_errexit  # a failed run inside $(…) ends the script, not a stale figure

here=$(cd "$(dirname "$0")" && pwd)
iters=${1:-200}
corpus=${2:-$here/../../shared/data/tinyshakespeare.txt}
attn=${ATTN:-$here/../build/release/attn}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "needs python3-torch: scripts/bootstrap --bench" >&2; exit 1; }

# attn: per-step times from metrics.csv (column 5), median over steps 10..end.
attn_median() {
  awk -F, 'NR > 1 && $5 != "" && $1 >= 10 { print $5 }' "$1/metrics.csv" | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'
}
run_attn() {  # threads [precision] [label]: each run its own directory
  local dir="$work/attn$1${2:-}${3:-}"
  /usr/bin/time -f "%M" -o "$work/time" "$attn" train --corpus "$corpus" --out "$dir" \
    --max-iters "$iters" --eval-interval 1000000 --eval-iters 1 --threads "$1" \
    --precision "${2:-f32}" >/dev/null
  echo "$(attn_median "$dir") $(awk '{ printf "%.0f", $1 / 1024 }' "$work/time")"
}
# The same with another process keeping a core busy (a shell loop), as on a shared machine.
run_attn_busy() {  # threads
  # One process, so that $! is the loop itself (a subshell in parentheses forks a second
  # process that survives the kill).
  sh -c 'while :; do :; done' >/dev/null &
  local busy=$! result
  # The loop is killed whether or not the run succeeds (a failed run once left it spinning).
  result=$(run_attn "$1" f32 busy) || { kill "$busy"; return 1; }
  kill "$busy"
  echo "$result"
}
run_torch() {  # threads, extra env, extra options
  env $2 /usr/bin/python3 "$here/gpt_torch.py" --corpus "$corpus" --iters "$iters" --threads "$1" ${3:-} |
    sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'
}

# Each result is assigned before it is split, so that set -e sees a run fail.
out=$(run_attn 2)
read -r attn2 attn2_mib <<<"$out"
out=$(run_attn 2 bf16)
read -r attn2_bf16 attn2_bf16_mib <<<"$out"
out=$(run_attn 1)
read -r attn1 attn1_mib <<<"$out"
out=$(run_attn_busy 2)
read -r attn2_busy _ <<<"$out"
out=$(run_attn_busy 1)
read -r attn1_busy _ <<<"$out"
torch2=$(run_torch 2 "")
torch2p=$(run_torch 2 OMP_WAIT_POLICY=passive)
torch1=$(run_torch 1 "")
own_kernel="-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
torch2p_own=$(run_torch 2 "$own_kernel OMP_WAIT_POLICY=passive")
torch1_own=$(run_torch 1 "$own_kernel")
torch1_bf16=$(run_torch 1 "$own_kernel" --bf16)
best=$(printf '%s\n' "$torch2" "$torch2p" "$torch1" "$torch2p_own" "$torch1_own" "$torch1_bf16" | sort -g | head -1)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "GPT training step, $iters steps, $(basename "$corpus"), char level, 4x4x128, block 64, batch 12"
printf '%-34s %10s %10s\n' "" "ms/iter" "peak MiB"
printf '%-34s %10s %10s\n' "attn, 2 threads" "$attn2" "$attn2_mib"
printf '%-34s %10s %10s\n' "attn, 2 threads, bf16 products" "$attn2_bf16" "$attn2_bf16_mib"
printf '%-34s %10s %10s\n' "attn, 1 thread" "$attn1" "$attn1_mib"
printf '%-34s %10s\n' "attn, 2 threads, other core busy" "$attn2_busy"
printf '%-34s %10s\n' "attn, 1 thread, other core busy" "$attn1_busy"
printf '%-34s %10s\n' "PyTorch, 2 threads" "$torch2"
printf '%-34s %10s\n' "PyTorch, 2 threads, passive wait" "$torch2p"
printf '%-34s %10s\n' "PyTorch, 1 thread" "$torch1"
printf '%-34s %10s\n' "PyTorch, 2 thr, passive, own BLAS" "$torch2p_own"
printf '%-34s %10s\n' "PyTorch, 1 thread, own BLAS" "$torch1_own"
printf '%-34s %10s\n' "PyTorch, 1 thr, own BLAS, bf16" "$torch1_bf16"
echo "attn (2 threads) vs PyTorch's best: $(ratio "$best" "$attn2")x faster in float," \
     "$(ratio "$best" "$attn2_bf16")x with bf16 products; vs PyTorch 2 threads: $(ratio "$torch2" "$attn2")x"
