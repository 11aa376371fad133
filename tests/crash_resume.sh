#!/usr/bin/env bash
# Kill a training run with SIGKILL at random moments, resume it each time, and check that the
# run that finishes wrote exactly what an uninterrupted run writes: the same checkpoint, byte
# for byte, and the same metrics.csv but its timings (rows past the checkpoint are dropped on
# resume).
#   tests/crash_resume.sh ATTN ROUNDS [SEED]
# ATTN is the CLI; ROUNDS kills are made (a run that finishes first ends the rounds early).
# Prints one line: rounds, kills during a checkpoint write (a temporary left), the outcome.
set -euo pipefail
attn=${1:?usage: crash_resume.sh ATTN ROUNDS [SEED]}
rounds=${2:?usage: crash_resume.sh ATTN ROUNDS [SEED]}
RANDOM=${3:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python_free_corpus() {  # 40 KB of text with some variety, without Python
  for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7919 % 1000))"; done
}
python_free_corpus >"$work/corpus.txt"
flags=(--corpus "$work/corpus.txt" --n-layer 2 --n-embd 64 --n-head 4 --block-size 32
       --batch-size 8 --max-iters 600 --eval-interval 10 --eval-iters 2 --threads 1
       --dropout 0.1)

"$attn" train "${flags[@]}" --out "$work/whole" >/dev/null

kills=0 torn=0 code=1
while ((kills < rounds)); do
  if [[ -f $work/cut/checkpoint.safetensors ]]; then
    "$attn" train "${flags[@]}" --out "$work/cut" --resume >/dev/null 2>&1 &
  else
    "$attn" train "${flags[@]}" --out "$work/cut" --force >/dev/null 2>&1 &
  fi
  pid=$!
  # 50–850 ms: the whole run takes about 3 s, so kills land in every phase.
  sleep "0.$(printf '%03d' $((50 + RANDOM % 800)))"
  kill -KILL "$pid" 2>/dev/null || true
  code=0
  wait "$pid" 2>/dev/null || code=$?
  ((code == 0)) && break  # it finished before the kill
  ((code == 137)) || { echo "crash_resume: a run failed on its own (exit $code)" >&2; exit 1; }
  kills=$((kills + 1))
  compgen -G "$work/cut/*.tmp-*" >/dev/null && torn=$((torn + 1))
done
# Finish what the last kill interrupted.
if ((code == 0)); then
  :
elif [[ -f $work/cut/checkpoint.safetensors ]]; then
  "$attn" train "${flags[@]}" --out "$work/cut" --resume >/dev/null
else
  "$attn" train "${flags[@]}" --out "$work/cut" --force >/dev/null
fi

status=0
cmp -s "$work/whole/checkpoint.safetensors" "$work/cut/checkpoint.safetensors" ||
  { echo "crash_resume: the checkpoints differ" >&2; status=1; }
# metrics.csv without its last two columns, ms and tokens per second: measured, never equal.
metrics() { cut -d, -f1-4 "$1"; }
cmp -s <(metrics "$work/whole/metrics.csv") <(metrics "$work/cut/metrics.csv") ||
  { echo "crash_resume: metrics.csv differs" >&2; status=1; }
leftover=$(compgen -G "$work/cut/*.tmp-*" || true)
[[ -z $leftover ]] || { echo "crash_resume: temporaries left: $leftover" >&2; status=1; }
echo "crash_resume: $kills SIGKILLs ($torn during a checkpoint write), then finished: $([[ $status == 0 ]] && echo 'checkpoint and metrics.csv identical to the uninterrupted run' || echo FAILED)"
exit $status
