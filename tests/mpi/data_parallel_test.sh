#!/usr/bin/env bash
# attn train under mpirun (data parallel) against one process, as a user runs it.
#   tests/mpi/data_parallel_test.sh ATTN MODE [N]
#   curve N   N processes train 50 steps; their metrics.csv equals one process's (iteration,
#             losses, learning rate), dropout on
#   resume    2 processes train 25 steps, 3 resume to 50: the same curve as one process
#   killed    SIGKILL one of 3 ranks mid-run: the job ends within 30 s, non-zero, and mpirun
#             names the rank that died
#   hung      SIGSTOP one of 3 ranks mid-run: the others end the job after --mpi-timeout (3 s)
#             with one line that names the collective they waited in (which one depends on
#             where the signal lands: most often the gradient sum)
# Tolerance of the curves: a rank sums its share of the batch's gradient, then the ranks' sums
# are added: the order of a float sum over B·T = 768 terms changes, which moves a gradient by
# at most ~768·2⁻²⁴ ≈ 5e-5 of its magnitude, and AdamW's normalised step by no more. Losses are
# compared to 1e-4 relative (metrics.csv prints 6 digits); measured on this machine: equal to
# the last printed digit for N = 2, 3, 4.
set -euo pipefail
attn=${1:?usage: data_parallel_test.sh ATTN MODE [N]}
mode=${2:?usage: data_parallel_test.sh ATTN MODE [N]}
ranks=${3:-2}
work=$(mktemp -d)
trap 'pkill -KILL -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT
# Every process on this machine: shared memory between ranks, mpirun's own traffic on loopback.
mpirun=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader
        --mca oob_tcp_if_include lo)

for i in $(seq 1 1500); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7919 % 1000))"; done >"$work/corpus.txt"
flags=(--corpus "$work/corpus.txt" --n-layer 2 --n-embd 64 --n-head 4 --block-size 32
       --batch-size 12 --max-iters 50 --lr-decay-iters 50 --eval-interval 25 --eval-iters 3
       --report-sample-tokens 0 --dropout 0.1 --threads 1)

# Compares the iteration, loss and lr columns of two metrics.csv files to 1e-4 relative.
same_curve() {
  paste -d, <(cut -d, -f1-4 "$1") <(cut -d, -f1-4 "$2") | awk -F, '
    NR == 1 { next }
    { for (i = 1; i <= 4; ++i) {
        a = $i; b = $(i + 4)
        if ((a == "") != (b == "")) { print "row " NR ": column " i " is \"" a "\" vs \"" b "\""; bad = 1; next }
        if (a == "") continue
        d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a
        if (d > 1e-4 * m) { print "row " NR ": column " i ": " a " vs " b; bad = 1 }
        if (d / (m > 0 ? m : 1) > worst) worst = d / (m > 0 ? m : 1)
      } rows++ }
    END { if (NR != rows + 1 || rows < 50) { print "rows: " rows; bad = 1 }
          printf "%d rows, worst relative difference %.3g\n", rows, worst; exit bad }'
}

one_process() { "$attn" train "${flags[@]}" --out "$work/one" >/dev/null; }

# The PID of rank $2 of the job whose mpirun is $1 (mpirun's children carry their rank).
rank_pid() {
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}

# Starts a long 3-rank run, waits for its first steps, applies signal $1 to rank 1, and checks
# that the job ends within $2 seconds, non-zero, with stderr matching $3.
break_a_rank() {
  "${mpirun[@]}" -np 3 "$attn" train "${flags[@]}" --max-iters 100000 --lr-decay-iters 0 \
    --mpi-timeout 3 --out "$work/broken" >"$work/broken.out" 2>"$work/broken.err" &
  local job=$!
  for _ in $(seq 1 300); do  # the first evaluation is printed once every rank has started
    grep -q "train loss" "$work/broken.out" 2>/dev/null && break
    sleep 0.1
  done
  local victim=""
  for _ in $(seq 1 50); do
    victim=$(rank_pid "$job" 1)
    [[ -n $victim ]] && break
    sleep 0.1
  done
  [[ -n $victim ]] || { echo "FAIL: no rank 1 under mpirun $job"; exit 1; }
  local start=$SECONDS
  kill "-$1" "$victim"
  local status=0
  for _ in $(seq 1 $(($2 * 10))); do
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$job" 2>/dev/null; then
    kill -KILL "$victim" 2>/dev/null || true
    echo "FAIL: the job still runs $2 s after SIG$1 to rank 1"
    exit 1
  fi
  wait "$job" || status=$?
  ((status != 0)) || { echo "FAIL: the job exited 0 after SIG$1 to rank 1"; exit 1; }
  grep -Eq "$3" "$work/broken.err" || { echo "FAIL: stderr lacks /$3/:"; cat "$work/broken.err"; exit 1; }
  echo "SIG$1 to rank 1 ended the job in $((SECONDS - start)) s, status $status: $(grep -Em1 "$3" "$work/broken.err")"
}

case $mode in
  curve)
    one_process
    "${mpirun[@]}" -np "$ranks" "$attn" train "${flags[@]}" --out "$work/many" >/dev/null
    same_curve "$work/one/metrics.csv" "$work/many/metrics.csv"
    ;;
  resume)
    one_process
    "${mpirun[@]}" -np 2 "$attn" train "${flags[@]}" --max-iters 25 --out "$work/cut" >/dev/null
    "${mpirun[@]}" -np 3 "$attn" train "${flags[@]}" --resume --out "$work/cut" >/dev/null
    same_curve "$work/one/metrics.csv" "$work/cut/metrics.csv"
    ;;
  killed) break_a_rank KILL 30 "rank 1 .*exited on signal 9" ;;
  hung)
    waits="the gradient sum|the loss sum|the evaluation loss sum|the parameter check"
    break_a_rank STOP 20 "^attn: error: rank [02] of 3: ($waits) did not finish within 3 s"
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
