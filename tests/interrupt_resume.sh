#!/usr/bin/env bash
# Interrupt a training run with SIGINT or SIGTERM at seeded random moments and check what attn
# promises: the run saves, prints one "interrupted (SIGINT|SIGTERM) at iteration N" line and
# exits 128 + the signal (130, 143), leaving a checkpoint and no temporary; `--resume` then
# finishes the run, and the finished checkpoint is the uninterrupted run's, byte for byte.
#   tests/interrupt_resume.sh ATTN ROUNDS [SEED]
# Each round starts a fresh run and signals it after a delay drawn from [0, 90 % of the length
# of an uninterrupted run]. A signal that lands before attn has installed its handler (process
# start-up, before anything is written) ends the process as the signal's default does; that
# is accepted only when the run left nothing behind. Prints one summary line.
set -euo pipefail
attn=${1:?usage: interrupt_resume.sh ATTN ROUNDS [SEED]}
rounds=${2:?usage: interrupt_resume.sh ATTN ROUNDS [SEED]}
RANDOM=${3:-11}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for i in $(seq 1 400); do
  echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7919 % 1000))"
done >"$work/corpus.txt"
flags=(--corpus "$work/corpus.txt" --n-layer 1 --n-embd 32 --n-head 2 --block-size 32
       --batch-size 8 --max-iters 200 --eval-interval 50 --eval-iters 2 --threads 1
       --dropout 0.1)

start=$(date +%s%N)
"$attn" train "${flags[@]}" --out "$work/whole" >/dev/null
whole_ms=$((($(date +%s%N) - start) / 1000000 + 1))

fail() {
  echo "interrupt_resume: round $round ($signal after $delay ms): $*" >&2
  exit 1
}

interrupted=0 early=0 late=0 saves_at_start=0
for round in $(seq 1 "$rounds"); do
  signal=$( ((RANDOM % 2)) && echo INT || echo TERM)
  delay=$((RANDOM % (whole_ms * 9 / 10)))  # so that most land while the run is still going
  dir=$work/run$round
  "$attn" train "${flags[@]}" --out "$dir" >"$work/out" 2>"$work/err" &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -s "$signal" "$pid" 2>/dev/null || true
  code=0
  wait "$pid" || code=$?
  if ((code == 0)); then
    late=$((late + 1))  # it finished first
    continue
  fi
  expected=$([[ $signal == INT ]] && echo 130 || echo 143)
  ((code == expected)) || fail "exit $code, expected $expected; stderr: $(head -c 300 "$work/err")"
  if ! grep -q "^interrupted (SIG$signal) at iteration [0-9]*; checkpoint saved" "$work/out"; then
    # Only the signal's default action ends a run without that line: before attn's handler.
    [[ ! -e $dir || -z $(ls -A "$dir") ]] || fail "ended without saving, and left $(ls "$dir")"
    early=$((early + 1))
    continue
  fi
  [[ -f $dir/checkpoint.safetensors ]] || fail "no checkpoint"
  ! compgen -G "$dir/*.tmp-*" >/dev/null || fail "a temporary left: $(ls "$dir")"
  grep -q "at iteration 0;" "$work/out" && saves_at_start=$((saves_at_start + 1))
  "$attn" train "${flags[@]}" --out "$dir" --resume >/dev/null 2>"$work/err" ||
    fail "the resume failed: $(head -c 300 "$work/err")"
  cmp -s "$work/whole/checkpoint.safetensors" "$dir/checkpoint.safetensors" ||
    fail "the resumed run's checkpoint differs from the uninterrupted run's"
  interrupted=$((interrupted + 1))
  rm -rf "$dir"
done
echo "interrupt_resume: $rounds signals within ${whole_ms} ms runs: $interrupted saved and resumed" \
  "to the uninterrupted checkpoint ($saves_at_start at iteration 0), $early before the handler," \
  "$late after the run ended"
