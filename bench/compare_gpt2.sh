#!/usr/bin/env bash
# GPT-2 small (124M parameters, random weights: nothing is downloaded) in attn and in PyTorch
# 2.13 (bench/gpt2_torch.py, the same file), one run: a 512-token prompt through the KV cache,
# then 256 greedy tokens one at a time, 2 threads; with float weights, then with bf16 ones.
#
#   bench/compare_gpt2.sh [RUNS]     (default 3; needs `make build`, which makes build/venv
#                                      with PyTorch 2.13: scripts/bootstrap --python)
#
# attn's row says how close each token comes to the memory-bandwidth limit (every weight and
# the cached K/V read once per token, at the read bandwidth measured before each run), and a
# line after it how close its prompt comes to the FMA peak measured in the same run. PyTorch
# runs with OpenMP's default wait, with OMP_WAIT_POLICY=passive and with a short spin
# (GOMP_SPINCOUNT=1000, PyTorch's fastest for the small GPT's step on a Zen 4); "PyTorch's best"
# is the fastest of those rows for each figure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
runs=${1:-3}
attn=${ATTN:-$here/../build/release/attn}
python=${PYTHON:-$here/../build/venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }
"$python" -c "import torch" 2>/dev/null || { echo "needs $python with torch: scripts/bootstrap --python" >&2; exit 1; }

"$attn" export --hf "$work/gpt2" --random gpt2 --seed 1
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }

# One comparison per weight dtype: attn --weights f32 / bf16 against PyTorch's model in
# float32 / bfloat16, each with the three OpenMP waits.
compare() {
  local weights=$1 dtype=$2 attn_json torch_rows=() names=() cases=()
  attn_json=$("$attn" bench generate --model "$work/gpt2" --threads 2 --runs "$runs" --json --weights "$weights")
  cases=("" "OMP_WAIT_POLICY=passive" "GOMP_SPINCOUNT=1000")
  names=("PyTorch $dtype" "PyTorch $dtype, passive wait" "PyTorch $dtype, short spin")
  for env_case in "${cases[@]}"; do
    torch_rows+=("$(env $env_case "$python" "$here/gpt2_torch.py" "$work/gpt2" --threads 2 --runs "$runs" --dtype "$dtype")")
  done
  echo
  printf '%-30s %14s %10s %10s\n' "$weights weights" "prompt tok/s" "ms/token" "%limit"
  printf '%-30s %14s %10s %9.0f%%\n' "attn --weights $weights" "$(field prompt_tokens_per_s <<<"$attn_json")" \
    "$(field ms_per_token <<<"$attn_json")" "$(awk -v f="$(field fraction_of_limit <<<"$attn_json")" 'BEGIN { print 100 * f }')"
  local best_prompt=0 best_ms=1e9 p m
  for i in "${!torch_rows[@]}"; do
    p=$(field prompt_tokens_per_s <<<"${torch_rows[$i]}") m=$(field ms_per_token <<<"${torch_rows[$i]}")
    printf '%-30s %14s %10s\n' "${names[$i]}" "$p" "$m"
    best_prompt=$(awk -v a="$best_prompt" -v b="$p" 'BEGIN { print (b > a ? b : a) }')
    best_ms=$(awk -v a="$best_ms" -v b="$m" 'BEGIN { print (b < a ? b : a) }')
  done
  echo "limit: $(field limit_ms_per_token <<<"$attn_json") ms/token at $(field bandwidth_gbps <<<"$attn_json") GB/s" \
       "($(awk -v b="$(field bytes_per_token <<<"$attn_json")" 'BEGIN { printf "%.0f", b / 1e6 }') MB a token)"
  awk -v ap="$(field prompt_tokens_per_s <<<"$attn_json")" -v am="$(field ms_per_token <<<"$attn_json")" \
      -v tp="$best_prompt" -v tm="$best_ms" \
      'BEGIN { printf "attn vs PyTorch'"'"'s best: prompt %.2fx, generation %.2fx\n", ap / tp, tm / am }'
  # The prompt is compute-bound: its share of the FMA peak, and the share 3x PyTorch would take.
  awk -v g="$(field prompt_flop <<<"$attn_json")" -v r="$(field prompt_gflops <<<"$attn_json")" \
      -v f="$(field prompt_fraction_of_peak <<<"$attn_json")" -v peak="$(field fma_peak_gflops <<<"$attn_json")" \
      -v ap="$(field prompt_tokens_per_s <<<"$attn_json")" -v tp="$best_prompt" \
      'BEGIN { printf "attn'"'"'s prompt: %.1f GFLOP at %.0f GFLOP/s, %.0f%% of the %.0f GFLOP/s FMA peak; 3x PyTorch'"'"'s best would be %.0f%%\n", g / 1e9, r, 100 * f, peak, 300 * f * tp / ap }'
}

echo "GPT-2 small, random weights, prompt 512 tokens then 256 greedy tokens, 2 threads, $runs runs"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); PyTorch $("$python" -c 'import torch; print(torch.__version__)')"
compare f32 float32
compare bf16 bfloat16
