#!/usr/bin/env bash
# attn's BPE tokenizer next to sentencepiece's, same file, same vocabulary sizes, same run.
#
#   bench/compare_tokenizer.sh [CORPUS] [VOCAB_SIZES] [REPEAT]
#   (defaults: ../shared/data/tinyshakespeare.txt, "512 4096" and 10; needs `make build` and
#   Debian's sentencepiece: scripts/bootstrap --bench)
#
# For each vocabulary size it times, as whole processes (wall seconds and peak resident
# memory from /usr/bin/time, so loading the model counts for both):
#   - training: `attn bpe train --byte-level --threads 2` and
#     `spm_train --model_type=bpe --num_threads=2` (sentencepiece's defaults otherwise);
#   - encoding the whole file: `attn bpe encode --threads 1`, `--threads 2`, and `spm_encode`
#     (one thread), each writing ids as text to /dev/null;
# and prints bytes per token for both, and whether attn's decode(encode(file)) is byte-identical.
# Then, with the last vocabulary, both encoders on the corpus repeated REPEAT times: both
# stream, so their peak memory should not grow with the input.
# sentencepiece normalises whitespace and maps rare characters to <unk>: it cannot give the
# file back, so only attn is checked for that.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
corpus=${1:-$here/../../shared/data/tinyshakespeare.txt}
sizes=${2:-512 4096}
repeat=${3:-10}
attn=${ATTN:-$here/../build/release/attn}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

command -v spm_train >/dev/null || { echo "needs sentencepiece: scripts/bootstrap --bench" >&2; exit 1; }
[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }

bytes=$(stat -c %s "$corpus")
# Runs a command, prints "seconds peak_MiB": wall time from the shell's clock in ns (GNU
# time's own is in 10 ms steps), peak resident memory from /usr/bin/time. The command's
# stdout goes to $work/out.
measure() {
  local start end
  start=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  end=$(date +%s%N)
  awk -v ns=$((end - start)) '{printf "%.3f %.1f\n", ns / 1e9, $1 / 1024}' "$work/time"
}
mbps() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.1f", (s > 0 ? b / s / 1e6 : 0) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }'; }

echo "corpus: $corpus ($bytes bytes); $(spm_train --version 2>&1 | head -1); attn byte-level BPE"
echo "MB/s: file bytes / the process's wall time; in-process: attn's own timing of encode_parallel"
printf "%6s %-26s %9s %9s %9s %11s %11s\n" vocab step seconds "peak MiB" "MB/s" "bytes/token" "in-process"
for v in $sizes; do
  read -r at am < <(measure "$attn" bpe train --corpus "$corpus" --vocab-size "$v" --byte-level --threads 2 --out "$work/attn.json")
  read -r st sm < <(measure spm_train --input="$corpus" --model_prefix="$work/spm" --vocab_size="$v" \
                      --model_type=bpe --num_threads=2 --minloglevel=2)
  printf "%6s %-26s %9s %9s %9s %11s\n" "$v" "train: attn (2 threads)" "$at" "$am" "" ""
  printf "%6s %-26s %9s %9s %9s %11s\n" "$v" "train: sentencepiece" "$st" "$sm" "" ""

  declare -A enc_s
  for t in 1 2; do
    read -r es em < <(measure "$attn" bpe encode --tokenizer "$work/attn.json" --threads "$t" "$corpus")
    enc_s[$t]=$es
    tokens=$(wc -w <"$work/out")
    inside=$("$attn" bpe encode --tokenizer "$work/attn.json" --threads "$t" --stats "$corpus" | sed -E 's/.* ([0-9.]+) MB\/s.*/\1/')
    printf "%6s %-26s %9s %9s %9s %11s %11s\n" "$v" "encode: attn ($t thread)" "$es" "$em" "$(mbps "$es")" \
      "$(awk -v b="$bytes" -v n="$tokens" 'BEGIN { printf "%.3f", b / n }')" "$inside"
    if [[ $t == 1 ]]; then cp "$work/out" "$work/ids"; fi
  done
  "$attn" bpe decode --tokenizer "$work/attn.json" "$work/ids" | cmp -s - "$corpus" && same=yes || same=NO
  read -r ss sm2 < <(measure spm_encode --model="$work/spm.model" --output_format=id --input="$corpus")
  spm_tokens=$(wc -w <"$work/out")
  printf "%6s %-26s %9s %9s %9s %11s %11s\n" "$v" "encode: sentencepiece" "$ss" "$sm2" "$(mbps "$ss")" \
    "$(awk -v b="$bytes" -v n="$spm_tokens" 'BEGIN { printf "%.3f", b / n }')" ""
  echo "       -> training $(ratio "$st" "$at") faster; encoding $(ratio "$ss" "${enc_s[1]}") faster on one thread," \
       "$(ratio "${enc_s[1]}" "${enc_s[2]}") from the second thread; attn decode(encode(file)) identical: $same"
done

if ((repeat > 1)); then
  for ((i = 0; i < repeat; i++)); do cat "$corpus"; done >"$work/big.txt"
  big=$(stat -c %s "$work/big.txt")
  read -r ab am < <(measure "$attn" bpe encode --tokenizer "$work/attn.json" --threads 1 "$work/big.txt")
  read -r sb sm < <(measure spm_encode --model="$work/spm.model" --output_format=id --input="$work/big.txt")
  echo "the corpus $repeat times ($big bytes), vocab $v, one thread:"
  printf "%6s %-26s %9s %9s %9s\n" "$v" "encode: attn" "$ab" "$am" "$(awk -v b="$big" -v s="$ab" 'BEGIN { printf "%.1f", b / s / 1e6 }')"
  printf "%6s %-26s %9s %9s %9s\n" "$v" "encode: sentencepiece" "$sb" "$sm" "$(awk -v b="$big" -v s="$sb" 'BEGIN { printf "%.1f", b / s / 1e6 }')"
  echo "       -> encoding $(ratio "$sb" "$ab") faster"
fi
