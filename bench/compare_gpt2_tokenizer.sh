#!/usr/bin/env bash
# GPT-2's tokenizer: attn's Gpt2Tokenizer next to tiktoken (OpenAI's Rust core, PyPI's build in
# build/venv), encoding the same ~10 MB of English in process, in the same run.
#
#   bench/compare_gpt2_tokenizer.sh [CORPUS] [COPIES] [ROUNDS]
#   (defaults: ../shared/data/tinyshakespeare.txt, 9 copies (10 MB), 3 rounds; needs `make
#   build`, which makes the venv)
#
# attn is timed by `attn bpe encode --stats` (encoding only, the file already read), tiktoken by
# bench/tiktoken_encode.py (encode_ordinary, or encode_ordinary_batch over newline-cut parts),
# each on 1 and 2 threads; each the fastest of ROUNDS runs after a warm-up, the runs alternating
# so that all see the same machine. All must give the same number of ids, and on 10 MB of mixed
# text the same ids. Prints MB/s and attn's ratio to tiktoken on as many threads.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
corpus=${1:-$here/../../shared/data/tinyshakespeare.txt}
copies=${2:-9}
rounds=${3:-3}
attn=${ATTN:-$here/../build/release/attn}
python=$here/../build/venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[[ -x $attn ]] || { echo "needs $attn: make build" >&2; exit 1; }
[[ -x $python ]] || { echo "needs $python: scripts/bootstrap --python" >&2; exit 1; }

for _ in $(seq "$copies"); do cat "$corpus"; done >"$work/text.txt"
bytes=$(stat -c %s "$work/text.txt")

best() { sort -g | tail -1; }
attn_mbs() {  # threads -> "tokens MB/s" of one run
  "$attn" bpe encode --tokenizer "$here/../tests/fixtures/gpt2" --stats --threads "$1" \
    "$work/text.txt" | awk '{print $1, $9}'
}
declare -A speeds
for round in $(seq "$rounds"); do
  for who in tiktoken1 attn1 tiktoken2 attn2; do
    case $who in
      tiktoken*) line=$("$python" "$here/tiktoken_encode.py" "$work/text.txt" "${who#tiktoken}") ;;
      attn*) line=$(attn_mbs "${who#attn}") ;;
    esac
    speeds[$who]+="${line##* } "
    [[ $who == tiktoken1 ]] && tk_tokens=${line%% *}
    [[ ${line%% *} != "$tk_tokens" ]] &&
      { echo "token counts differ: tiktoken $tk_tokens, $who ${line%% *}" >&2; exit 1; }
  done
done
# The ids themselves, not only their count, on 10 MB of mixed text: tests/fixtures/gpt2's 1 MB of
# many scripts, emoji, numbers and whitespace, ten times.
for _ in $(seq 10); do cat "$here/../tests/fixtures/gpt2/mixed_1mb.txt"; done >"$work/mixed.txt"
"$attn" bpe encode --tokenizer "$here/../tests/fixtures/gpt2" "$work/mixed.txt" | tr -s ' \n' '\n\n' \
  >"$work/attn.ids"
"$python" "$here/tiktoken_encode.py" --ids "$work/mixed.txt" | tr -s ' \n' '\n\n' >"$work/tiktoken.ids"
cmp -s "$work/attn.ids" "$work/tiktoken.ids" ||
  { echo "the ids of 10 MB of mixed text differ from tiktoken's" >&2; exit 1; }
mixed_ids=$(grep -c . "$work/attn.ids")

fastest() { tr ' ' '\n' <<<"${speeds[$1]}" | grep . | best; }
t1=$(fastest tiktoken1) t2=$(fastest tiktoken2) a1=$(fastest attn1) a2=$(fastest attn2)
echo "GPT-2 tokenizer, $bytes bytes ($copies × $(basename "$corpus")), $tk_tokens ids; best of $rounds"
echo "the same $mixed_ids ids as tiktoken on 10 MB of mixed text (10 x tests/fixtures/gpt2/mixed_1mb.txt)"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
version=$("$python" -c 'import tiktoken; print(tiktoken.__version__)')
printf '%-34s %8s MB/s\n' "tiktoken $version, 1 thread" "$t1"
printf '%-34s %8s MB/s\n' "tiktoken $version, 2 threads" "$t2"
printf '%-34s %8s MB/s  %sx tiktoken\n' "attn, 1 thread" "$a1" "$(ratio "$a1" "$t1")"
printf '%-34s %8s MB/s  %sx tiktoken on 2, %sx 1 thread\n' "attn, 2 threads" "$a2" \
  "$(ratio "$a2" "$t2")" "$(ratio "$a2" "$a1")"
