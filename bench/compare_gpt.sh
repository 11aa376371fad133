#!/usr/bin/env bash
# attn's GPT trainer next to the same model in PyTorch (bench/gpt_torch.py), same corpus, same
# configuration, same number of steps, in one run.
#
#   bench/compare_gpt.sh [ITERS] [CORPUS]
#   (defaults: 200 and ../shared/data/tinyshakespeare.txt; needs `make build`, which makes
#   build/venv with PyTorch 2.13: scripts/bootstrap --python)
#
# The model is the small character-level one of `attn train`'s defaults: 4 layers, 4 heads,
# n_embd 128, block 64, batch 12, AdamW, warm-up + cosine, clipping at 1.0. Both run on 2
# threads; PyTorch (its attention F.scaled_dot_product_attention, its fused CPU kernel) also on
# 1 thread, with OMP_WAIT_POLICY=passive (its default OpenMP spin-wait collapses on a 2-core
# machine when another process is busy), with a short spin (GOMP_SPINCOUNT=1000: its fastest
# alone on a Zen 4, 37.8-41.4 ms against 45.3 by default), under torch.compile, and in mixed
# precision (CPU autocast to bfloat16, next to attn's --precision bf16); attn also with a busy
# loop on the other core, 2 threads next to 1 (two threads should never lose). "PyTorch's best"
# is the fastest of all its rows. Each side reports the median ms of one training step
# (forward, backward, clipping, AdamW; data sampling and evaluation excluded; torch.compile's
# compilation falls in the first steps, before the median's window); attn's peak resident
# memory comes from /usr/bin/time.
set -euo pipefail
shopt -s inherit_errexit  # a failed run inside $(…) ends the script, not a stale figure

here=$(cd "$(dirname "$0")" && pwd)
iters=${1:-200}
corpus=${2:-$here/../../shared/data/tinyshakespeare.txt}
attn=${ATTN:-$here/../build/release/attn}
python=${PYTHON:-$here/../build/venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }
"$python" -c "import torch" 2>/dev/null || { echo "needs $python with torch: scripts/bootstrap --python" >&2; exit 1; }

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
  env $2 PYTHONPATH="$here/../build/release/python" "$python" "$here/gpt_torch.py" --corpus "$corpus" --iters "$iters" --threads "$1" ${3:-} |
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
torch2s=$(run_torch 2 GOMP_SPINCOUNT=1000)
torch2s_compile=$(run_torch 2 GOMP_SPINCOUNT=1000 --compile)
torch1=$(run_torch 1 "")
torch2p_compile=$(run_torch 2 OMP_WAIT_POLICY=passive --compile)
torch2p_bf16=$(run_torch 2 OMP_WAIT_POLICY=passive --bf16)
torch1_bf16=$(run_torch 1 "" --bf16)
best=$(printf '%s\n' "$torch2" "$torch2p" "$torch2s" "$torch1" "$torch2p_compile" \
  "$torch2s_compile" "$torch2p_bf16" "$torch1_bf16" | sort -g | head -1)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "PyTorch $("$python" -c 'import torch; print(torch.__version__)'); CPU: $(lscpu | sed -n 's/^Model name: *//p')"
echo "GPT training step, $iters steps, $(basename "$corpus"), char level, 4x4x128, block 64, batch 12"
printf '%-34s %10s %10s\n' "" "ms/iter" "peak MiB"
printf '%-34s %10s %10s\n' "attn, 2 threads" "$attn2" "$attn2_mib"
printf '%-34s %10s %10s\n' "attn, 2 threads, bf16 products" "$attn2_bf16" "$attn2_bf16_mib"
printf '%-34s %10s %10s\n' "attn, 1 thread" "$attn1" "$attn1_mib"
printf '%-34s %10s\n' "attn, 2 threads, other core busy" "$attn2_busy"
printf '%-34s %10s\n' "attn, 1 thread, other core busy" "$attn1_busy"
printf '%-34s %10s\n' "PyTorch, 2 threads" "$torch2"
printf '%-34s %10s\n' "PyTorch, 2 threads, passive wait" "$torch2p"
printf '%-34s %10s\n' "PyTorch, 2 threads, short spin" "$torch2s"
printf '%-34s %10s\n' "PyTorch, 1 thread" "$torch1"
printf '%-34s %10s\n' "PyTorch, 2 thr, passive, compile" "$torch2p_compile"
printf '%-34s %10s\n' "PyTorch, 2 thr, short spin, compile" "$torch2s_compile"
printf '%-34s %10s\n' "PyTorch, 2 thr, passive, bf16" "$torch2p_bf16"
printf '%-34s %10s\n' "PyTorch, 1 thread, bf16" "$torch1_bf16"
echo "attn (2 threads) vs PyTorch's best: $(ratio "$best" "$attn2")x faster in float," \
     "$(ratio "$best" "$attn2_bf16")x with bf16 products; vs PyTorch 2 threads: $(ratio "$torch2" "$attn2")x"
