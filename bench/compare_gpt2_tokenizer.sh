#!/usr/bin/env bash
# GPT-2's tokenizer: attn's Gpt2Tokenizer next to the npm package tiktoken (the WASM build of
# tiktoken's Rust core), encoding the same ~10 MB of English in process, in the same run.
#
#   bench/compare_gpt2_tokenizer.sh [CORPUS] [COPIES] [ROUNDS]
#   (defaults: ../shared/data/tinyshakespeare.txt, 9 copies (10 MB), 3 rounds; needs `make
#   build`, Node.js and npm: it installs tiktoken@1.0.22 into build/npm)
#
# attn is timed by `attn bpe encode --stats` (encoding only, the file already read) on 1 and 2
# threads, tiktoken by bench/tiktoken_encode.mjs (one thread: WASM has no threads here); each
# the fastest of ROUNDS runs after a warm-up, the two alternating so that both see the same
# machine. Both must give the same number of ids. Prints MB/s and attn's ratio to tiktoken.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
corpus=${1:-$here/../../shared/data/tinyshakespeare.txt}
copies=${2:-9}
rounds=${3:-3}
attn=${ATTN:-$here/../build/release/attn}
modules=$here/../build/npm/node_modules
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }
command -v npm >/dev/null || { echo "needs Node.js and npm" >&2; exit 1; }
[[ -d $modules/tiktoken ]] ||
  npm install --no-save --silent --prefix "$here/../build/npm" tiktoken@1.0.22 >&2

for _ in $(seq "$copies"); do cat "$corpus"; done >"$work/text.txt"
bytes=$(stat -c %s "$work/text.txt")

best() { sort -g | tail -1; }
attn_mbs() {  # threads -> "tokens MB/s" of one run
  "$attn" bpe encode --tokenizer "$here/../tests/fixtures/gpt2" --stats --threads "$1" \
    "$work/text.txt" | awk '{print $1, $9}'
}
declare -A speeds
for round in $(seq "$rounds"); do
  for who in tiktoken attn1 attn2; do
    case $who in
      tiktoken) line=$(node "$here/tiktoken_encode.mjs" "$modules" "$work/text.txt" 1) ;;
      attn1) line=$(attn_mbs 1) ;;
      attn2) line=$(attn_mbs 2) ;;
    esac
    speeds[$who]+="${line##* } "
    [[ $who == tiktoken ]] && tk_tokens=${line%% *}
    [[ $who != tiktoken && ${line%% *} != "$tk_tokens" ]] &&
      { echo "token counts differ: tiktoken $tk_tokens, $who ${line%% *}" >&2; exit 1; }
  done
done
tk=$(tr ' ' '\n' <<<"${speeds[tiktoken]}" | grep . | best)
a1=$(tr ' ' '\n' <<<"${speeds[attn1]}" | grep . | best)
a2=$(tr ' ' '\n' <<<"${speeds[attn2]}" | grep . | best)
echo "GPT-2 tokenizer, $bytes bytes ($copies × $(basename "$corpus")), $tk_tokens ids; best of $rounds"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-32s %8s MB/s\n' "tiktoken (npm, WASM), 1 thread" "$tk"
printf '%-32s %8s MB/s  %sx tiktoken\n' "attn, 1 thread" "$a1" "$(ratio "$a1" "$tk")"
printf '%-32s %8s MB/s  %sx tiktoken, %sx 1 thread\n' "attn, 2 threads" "$a2" \
  "$(ratio "$a2" "$tk")" "$(ratio "$a2" "$a1")"
