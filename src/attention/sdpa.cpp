// The fused attention forward: argument checks, the task partition over (batch, head, query
// block), per-worker scratch. The SIMD work is in src/kernels/flash_forward.cpp.
#include "attn/sdpa.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/attention/amx_operands.hpp"
#include "src/attention/decode_run.hpp"
#include "src/attention/flash_problem.hpp"
#include "src/attention/fused.hpp"
#include "src/attention/staged_keys.hpp"
#include "src/core/kept_buffer.hpp"
#include "src/core/memory_limit.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/decode.hpp"
#include "src/kernels/flash_forward.hpp"
#include "src/kernels/prefetch.hpp"
#include "src/kernels/reductions.hpp"
#include "src/reference/finite.hpp"

namespace attn {
namespace detail {
namespace {

// True when the query rows [q0, q0 + rows) of head (b, h), or this block's share of the K and
// V rows of its K/V head, hold NaN or ±inf. The first query head of each K/V group scans that
// group's K/V rows, split over the head's `blocks` query blocks, so every row is read once. On
// AMX tiles the packing of K and V scanned them (attach_amx_operands).
bool task_inputs_non_finite(const kernels::FlashProblem& p, int64_t b, int64_t h, int64_t q0,
                            int64_t rows, int64_t blocks) {
  if (p.q_words != nullptr ? rows_non_finite(p.q_words, p.q_stride, b, h, q0, rows, p.d)
                           : rows_non_finite(p.q, p.q_stride, b, h, q0, rows, p.d))
    return true;
  const int64_t group = p.heads / p.kv_heads;
  if (h % group != 0 || p.amx_keys.data != nullptr) return false;
  const int64_t block = q0 / kernels::kQueryBlock;
  const int64_t first = block * p.tk / blocks, count = (block + 1) * p.tk / blocks - first;
  return key_rows_non_finite(p, b, h / group, first, count);
}

}  // namespace

void sdpa_into(const AttentionDims& dims, const Tensor& q_in, const Tensor& k_in,
               const Tensor& v_in, const SdpaOptions& options, const Tensor& out, float* logsumexp,
               std::atomic<bool>* non_finite_input, OperandValues values) {
  const PhaseScope clock(Phase::kAttention);
  ATTN_CHECK(out.shape() == with_last_dim(q_in, dims.dv) && out.strides().back() == 1,
             "sdpa: the output view ", out.shape_string(), " must be ",
             to_string(with_last_dim(q_in, dims.dv)), " with contiguous rows");
  // On AMX tiles the packing rounds Q, K and V as it reads them (amx_operands.hpp).
  const bool on_amx = products_on_amx(options);
  const Tensor q = operand_rows_for(q_in, options, on_amx, values),
               k = operand_rows_for(k_in, options, on_amx, values),
               v = operand_rows_for(v_in, options, on_amx, values);
  const Tensor mask4 = broadcast_mask(options.mask, with_last_dim(q, dims.tk));

  const kernels::FlashProblem p = flash_problem(dims, as_rank4(q), as_rank4(k), as_rank4(v),
                                                as_rank4(out), mask4, options, logsumexp);

  forward_tasks({p}, non_finite_input, on_amx);
}

void forward_tasks(const std::vector<kernels::FlashProblem>& problems_in,
                   std::atomic<bool>* non_finite_input, bool on_amx) {
  // bf16 products on a CPU with AMX: K and V packed for its tiles first (amx_operands.hpp).
  std::vector<kernels::FlashProblem> problems = problems_in;
  std::vector<AmxOperands> amx_operands(problems.size());
  for (size_t i = 0; on_amx && i < problems.size(); ++i)
    attach_amx_operands(problems[i], AmxPass::kForward, amx_operands[i], non_finite_input);

  // Tasks: (problem, batch, head, query block), the blocks of one head consecutive, so a thread
  // keeps that head's K and V in cache (taking the blocks of every head in turn instead
  // streamed all heads' K/V through L3). Heads sharing a K/V head are adjacent. With a causal
  // mask later blocks see more keys, so each head's blocks run alternately from both ends
  // (last, first, second-last, …): a thread's share that ends inside a head (one head, say)
  // gets its fair part of the work. Several problems (packed sequences) make one list, so no
  // thread waits at the end of one for the next to begin.
  std::vector<int64_t> first_task{0};  // problem i's tasks: [first_task[i], first_task[i + 1])
  for (const kernels::FlashProblem& p : problems) {
    const int64_t blocks = (p.tq + kernels::kQueryBlock - 1) / kernels::kQueryBlock;
    first_task.push_back(first_task.back() + blocks * p.batch * p.heads);
  }
  size_t scratch_floats = 0;
  for (const kernels::FlashProblem& p : problems)
    scratch_floats = std::max(scratch_floats, kernels::flash_forward_scratch_floats(p));
  const WorkerScratch scratch(num_threads(), scratch_floats);
  struct Block {
    const kernels::FlashProblem* p;
    int64_t b, h, q0, rows, blocks;
  };
  auto block_of = [&](int64_t task) {
    const auto at = std::upper_bound(first_task.begin(), first_task.end(), task) - 1;
    const kernels::FlashProblem& p = problems[static_cast<size_t>(at - first_task.begin())];
    const int64_t local = task - *at;
    const int64_t blocks = (p.tq + kernels::kQueryBlock - 1) / kernels::kQueryBlock;
    const int64_t bh = local / blocks;
    const int64_t q0 =
        (blocks - 1 - alternating_ends(local % blocks, blocks)) * kernels::kQueryBlock;
    return Block{&p,    bh / p.heads, bh % p.heads, q0, std::min(kernels::kQueryBlock, p.tq - q0),
                 blocks};
  };
  // K and V rows apart (a packed batch's, a layer's QKV columns): each worker's copy of its
  // head's rows (staged_keys.hpp).
  std::vector<StagedKeys> staged(static_cast<size_t>(num_threads()));
  auto as_read = [&](const Block& x, StagedKeys& stage) -> const kernels::FlashProblem& {
    return StagedKeys::applies(*x.p) ? stage.problem_for(*x.p, x.b, x.h) : *x.p;
  };
  const int64_t tasks = first_task.back();
  parallel_for_workers(tasks, [&](int64_t task, int worker) {
    StagedKeys& stage = staged[static_cast<size_t>(worker)];
    const Block x = block_of(task);
    const kernels::FlashProblem& p = as_read(x, stage);
    if (task + 1 < tasks) {  // most often this worker's next task (see kernels/prefetch.hpp)
      const Block next = block_of(task + 1);
      kernels::prefetch_forward_block(stage.current_for(*next.p, next.b, next.h), next.b, next.h,
                                      next.q0, next.rows);
    }
    if (non_finite_input && task_inputs_non_finite(p, x.b, x.h, x.q0, x.rows, x.blocks)) {
      non_finite_input->store(true, std::memory_order_relaxed);
    }
    kernels::flash_forward_block(p, x.b, x.h, x.q0, x.rows, scratch.of(worker));
  });
}

namespace {

// Finite inputs must give a finite result or an error: scores past float32's range (|q|, |k|
// near 1e19 and up at d = 64) make the online softmax NaN (+inf scores) or hide every key
// (-inf scores, a row of zeros). Both show in the logsumexp: NaN, or +inf for a row that sees
// keys (without an explicit mask or key lengths: a row whose causal/window range holds a key).
bool row_sees_keys(const AttentionDims& dims, const SdpaOptions& options, int64_t i) {
  if (!options.mask.empty() || !options.key_lengths.empty() || !options.key_starts.empty())
    return false;  // not known here
  if (!options.causal && options.window == 0) return true;
  const int64_t p = dims.query_position0 + i;
  const int64_t last = std::min(p, dims.tk - 1);
  const int64_t first = options.window > 0 ? std::max<int64_t>(0, p - options.window + 1) : 0;
  return first <= last;
}

}  // namespace

void check_scores_fit(const AttentionDims& dims, const SdpaOptions& options,
                      const Tensor& logsumexp) {
  const float* lse = logsumexp.data();
  // Most often every value is finite: one vector scan says so (the row-by-row test below was
  // 1 % of a causal forward at T = 256, on the calling thread alone).
  if (!kernels::any_non_finite(lse, 1, logsumexp.numel(), logsumexp.numel())) return;
  for (int64_t row = 0; row < logsumexp.numel(); ++row) {
    const int64_t i = row % dims.tq;
    const bool sees_keys = row_sees_keys(dims, options, i);
    ATTN_CHECK(!std::isnan(lse[row]) && !(sees_keys && std::isinf(lse[row])),
               "sdpa: the scores of query ", i, " overflow float32 (|q|·|k|·scale beyond ",
               "3.4e38); scale q or k down");
  }
}

}  // namespace detail

namespace detail {

// One query row, or a few at the end of the keys (causal), against K and V whose rows are
// contiguous (laid out (B, Hkv, Tk, d), or at any row stride: a packed batch's rows, a layer's
// Q, K, V columns), with no mask and no weights asked for: the decode kernel's problem. Its
// tasks split the keys, so both cores stream them; the fused forward gives a query row to one
// task (one row against 64k keys, 16 heads, d = 64, two Zen 2 threads: 56.7 ms, where the
// decode kernel reads at 21 GB/s).
bool decode_applies(const AttentionDims& dims, const Tensor& q, const Tensor& k, const Tensor& v,
                    const SdpaOptions& options) {
  if (!options.mask.empty() || !options.key_lengths.empty() || !options.key_starts.empty() ||
      options.return_weights)
    return false;
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || k.dim(0) != q.dim(0)) return false;
  return decode_rows_apply(k, v, 2, dims.d) && decode_step_applies(dims, q, options);
}

bool decode_rows_apply(const Tensor& k, const Tensor& v, int64_t row_dim, int64_t d) {
  // K and V at the same strides (one set for both in the kernel), rows contiguous and apart.
  return k.strides() == v.strides() && k.strides().back() == 1 &&
         k.strides()[static_cast<size_t>(row_dim)] >= d;
}

bool decode_step_applies(const AttentionDims& dims, const Tensor& q, const SdpaOptions& options) {
  if (options.precision != Dtype::kFloat32 || q.strides().back() != 1 || dims.dv != dims.d)
    return false;
  // Rows are read in whole vectors: a head dim off the widest vector would read past the end of
  // the caller's K and V (ASan caught it with d = 4).
  if (dims.d % kernels::kDecodeMaxVectorFloats != 0) return false;
  if (options.causal) return dims.tq < kDecodeRowLimit && dims.query_position0 == dims.tk - dims.tq;
  return dims.tq == 1 && options.window == 0;  // one row that sees every key
}

SdpaResult decode(const AttentionDims& dims, const Tensor& q, const Tensor& k, const Tensor& v,
                  const SdpaOptions& options, const char* caller) {
  check_finite(q, caller, "q");  // a few rows; K and V are scanned inside the tasks
  kernels::DecodeProblem p = decode_problem_of(dims, q, options);
  p.k = k.data();
  p.v = v.data();
  for (int i = 0; i < 3; ++i) p.kv_stride[i] = k.strides()[static_cast<size_t>(i)];
  const int64_t begin = first_visible_position(p);
  std::atomic<bool> non_finite_kv{false};
  SdpaResult result = run_decode(p, begin, &non_finite_kv);
  if (non_finite_kv.load()) check_finite_qkv(caller, q, k, v);  // throws, naming it
  return result;
}

SdpaResult sdpa_of(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options,
                   OperandValues values) {
  const detail::AttentionDims dims = detail::check_attention(q, k, v, options);
  detail::check_fits_in_memory(detail::with_last_dim(q, dims.dv), "sdpa: the output");
  if (decode_applies(dims, q, k, v, options)) {
    SdpaResult result = decode(dims, q, k, v, options, "sdpa");
    detail::check_scores_fit(dims, options, result.logsumexp);
    return result;
  }
  if (options.return_weights)
    detail::check_weights_fit(dims, detail::with_last_dim(q, dims.tk), "sdpa");
  Shape lse_shape = q.shape();
  lse_shape.pop_back();  // q has rank >= 2
  // Not zeroed: the kernels write every element of both.
  SdpaResult result{Tensor::uninitialized(detail::with_last_dim(q, dims.dv)), Tensor{},
                    Tensor::uninitialized(lse_shape)};
  std::atomic<bool> non_finite_input{false};
  detail::sdpa_into(dims, q, k, v, options, result.output, result.logsumexp.data(),
                    &non_finite_input, values);
  if (non_finite_input.load()) detail::check_finite_qkv("sdpa", q, k, v);  // throws, naming it
  detail::check_scores_fit(dims, options, result.logsumexp);
  if (options.return_weights) result.weights = reference::sdpa(q, k, v, options).weights;
  return result;
}

}  // namespace detail

SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  return detail::sdpa_of(q, k, v, options, detail::OperandValues::kFloat32);
}

}  // namespace attn
