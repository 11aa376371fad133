// The checks, run layout and buffers of ring attention (ring_common.hpp).
#include "src/distributed/ring_common.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <limits>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/core/storage.hpp"

namespace attn::distributed::detail {
namespace {

Shape with_rows(Shape shape, int64_t rows) {
  shape[shape.size() - 2] = rows;
  return shape;
}

// What every rank must agree on, folded into one number (FNV-1a over the values).
int64_t signature(const Tensor& q, const Tensor& k, const Tensor& v, const RingOptions& o) {
  std::vector<int64_t> values = {q.rank(),           q.dim(-1),
                                 v.dim(-1),          o.attention.causal ? 1 : 0,
                                 o.attention.window, static_cast<int64_t>(o.layout)};
  for (const Tensor* t : {&q, &k}) {
    for (int i = 0; i + 2 < t->rank(); ++i) values.push_back(t->dim(i));
  }
  const float scale = o.attention.scale.value_or(0.0f);
  values.push_back(std::bit_cast<int32_t>(scale));
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t x : values) {
    h ^= static_cast<uint64_t>(x);
    h *= 0x100000001b3ull;
  }
  return static_cast<int64_t>(h);
}

// The checks of this rank's own arguments; "" when they pass.
std::string local_problem(const Tensor& q, const Tensor& k, const Tensor& v, const RingOptions& o) {
  try {
    ATTN_CHECK(o.attention.mask.empty() && o.attention.key_lengths.empty() &&
                   o.attention.key_starts.empty(),
               "ring_sdpa: an explicit mask, key_lengths or key_starts cannot be used (no rank "
               "holds the ",
               "whole score matrix); causal and window can");
    ATTN_CHECK(o.attention.softcap == 0.0f && o.attention.alibi_slopes.empty() &&
                   o.attention.sinks.empty(),
               "ring_sdpa: softcap, alibi_slopes and sinks are not supported across ranks yet");
    ATTN_CHECK(o.attention.precision == Dtype::kFloat32,
               "ring_sdpa: bf16 products are not supported across ranks yet");
    attn::detail::check_attention(q, k, v, o.attention);
    attn::detail::check_finite_qkv("ring_sdpa", q, k, v);
    ATTN_CHECK(q.dim(-2) == k.dim(-2), "ring_sdpa: q and k must hold the same rows of one ",
               "sequence, got q ", q.shape_string(), " and k ", k.shape_string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

void fail_together(const Communicator& comm, const std::string& problem, const char* what) {
  if (!comm.any(!problem.empty())) return;
  if (!problem.empty()) throw Error(problem);
  throw Error(std::string(what) + ": another rank's arguments are wrong (its error names them)");
}

RingLayout check_ring(const Communicator& comm, const Tensor& q, const Tensor& k, const Tensor& v,
                      const RingOptions& options) {
  fail_together(comm, local_problem(q, k, v, options), "ring_sdpa");
  const std::vector<int64_t> signatures = comm.gather_all(signature(q, k, v, options));
  for (size_t r = 1; r < signatures.size(); ++r) {
    ATTN_CHECK(signatures[r] == signatures[0], "ring_sdpa: rank ", r, " and rank 0 differ in ",
               "the leading dims, widths or options of q, k, v (only the rows may differ)");
  }
  RingLayout layout;
  layout.rows = comm.gather_all(q.dim(-2));
  for (int64_t rows : layout.rows) layout.t += rows;
  const int n = comm.size();
  for (int r = 0; r < n; ++r) {
    layout.runs.push_back(sequence_runs(layout.t, n, r, options.layout));
    int64_t expected = 0;
    for (const SequenceRun& run : layout.runs.back()) expected += run.length();
    ATTN_CHECK(layout.rows[static_cast<size_t>(r)] == expected, "ring_sdpa: rank ", r, " holds ",
               layout.rows[static_cast<size_t>(r)], " rows; its ", to_string(options.layout),
               " share of the ", layout.t, " positions is ", expected, " (see shard_sequence)");
  }
  layout.next = (comm.rank() + 1) % n;
  layout.previous = (comm.rank() + n - 1) % n;
  return layout;
}

Tensor rows_of(const Tensor& t, int64_t first, int64_t count) {
  return t.as_strided(with_rows(t.shape(), count), t.strides(),
                      first * t.strides()[t.strides().size() - 2]);
}

std::optional<int64_t> query_position0(const SequenceRun& queries, const SequenceRun& keys,
                                       const SdpaOptions& options) {
  if (!options.causal && options.window == 0) return 0;
  // Key j is seen by query p when p − window < j ≤ p: by some query of the run unless every
  // key comes after the last query or before the first query's window.
  if (keys.begin > queries.end - 1) return std::nullopt;
  if (options.window > 0 && keys.end - 1 <= queries.begin - options.window) return std::nullopt;
  return queries.begin - keys.begin;
}

std::vector<VisiblePair> visible_pairs(const RingLayout& layout, int me, int owner,
                                       const SdpaOptions& options) {
  std::vector<VisiblePair> pairs;
  int64_t q_row = 0;
  for (const SequenceRun& q_run : layout.runs[static_cast<size_t>(me)]) {
    int64_t k_row = 0;
    for (const SequenceRun& k_run : layout.runs[static_cast<size_t>(owner)]) {
      if (const std::optional<int64_t> position0 = query_position0(q_run, k_run, options)) {
        pairs.push_back({q_row, q_run.length(), k_row, k_run.length(), *position0});
      }
      k_row += k_run.length();
    }
    q_row += q_run.length();
  }
  return pairs;
}

attn::detail::AttentionDims pair_dims(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const SdpaOptions& options, const VisiblePair& pair) {
  attn::detail::AttentionDims dims = attn::detail::check_attention(q, k, v, options);
  dims.query_position0 = pair.query_position0;
  return dims;
}

Tensor uninitialized(int64_t n) {
  std::shared_ptr<void> memory(
      attn::detail::allocate_storage(static_cast<size_t>(n) * sizeof(float)),
      attn::detail::free_storage);
  return Tensor::from_external(static_cast<float*>(memory.get()), n, {n}, {1}, 0, memory);
}

Tensor rows_view(const Tensor& flat, const Shape& like, int64_t rows, int64_t offset) {
  const Shape shape = with_rows(like, rows);
  return flat.as_strided(shape, contiguous_strides(shape), offset);
}

KeysValuesBuffer::KeysValuesBuffer(const Tensor& k, const Tensor& v, const RingLayout& layout)
    : k_shape_(k.shape()), v_shape_(v.shape()), rows_(layout.rows) {
  const int64_t most = *std::max_element(rows_.begin(), rows_.end());
  buffer_ = uninitialized(most * (k.numel() / k.dim(-2) + v.numel() / v.dim(-2)));
}

Tensor KeysValuesBuffer::keys(int owner) const {
  return rows_view(buffer_, k_shape_, rows_[static_cast<size_t>(owner)]);
}

Tensor KeysValuesBuffer::values(int owner) const {  // after owner's keys
  return rows_view(buffer_, v_shape_, rows_[static_cast<size_t>(owner)], keys(owner).numel());
}

int64_t KeysValuesBuffer::floats(int owner) const {
  return keys(owner).numel() + values(owner).numel();
}

KeysValuesRing::KeysValuesRing(const Communicator& comm, const RingLayout& layout, const Tensor& k,
                               const Tensor& v)
    : comm_(comm),
      layout_(layout),
      owner_(comm.rank()),
      keys_(k.contiguous()),
      values_(v.contiguous()) {
  if (comm.size() > 1) buffers_ = {KeysValuesBuffer(k, v, layout), KeysValuesBuffer(k, v, layout)};
}

void KeysValuesRing::start_step(int step) {
  const int n = comm_.size();
  owner_ = (comm_.rank() - step + n) % n;
  requests_.clear();
  if (step + 1 >= n) return;  // the last step: nothing more to pass on
  incoming_ = (owner_ - 1 + n) % n;
  KeysValuesBuffer& into = buffers_[static_cast<size_t>(arriving_)];
  Tensor next_keys = into.keys(incoming_), next_values = into.values(incoming_);
  requests_.resize(4);
  MPI_Irecv(next_keys.data(), message_count(next_keys.numel(), "K"), MPI_FLOAT, layout_.previous,
            kTagKeysValues, comm_.handle(), &requests_[0]);
  MPI_Irecv(next_values.data(), message_count(next_values.numel(), "V"), MPI_FLOAT,
            layout_.previous, kTagKeysValues, comm_.handle(), &requests_[1]);
  MPI_Isend(keys_.data(), message_count(keys_.numel(), "K"), MPI_FLOAT, layout_.next,
            kTagKeysValues, comm_.handle(), &requests_[2]);
  MPI_Isend(values_.data(), message_count(values_.numel(), "V"), MPI_FLOAT, layout_.next,
            kTagKeysValues, comm_.handle(), &requests_[3]);
}

void KeysValuesRing::poke() { comm_.poll(requests_); }

void KeysValuesRing::finish_step() {
  if (requests_.empty()) return;
  comm_.wait(requests_, "ring attention's K/V transfer");
  const KeysValuesBuffer& held = buffers_[static_cast<size_t>(arriving_)];
  keys_ = held.keys(incoming_);
  values_ = held.values(incoming_);
  arriving_ = 1 - arriving_;  // the buffer just sent from takes the next step's
}

// Over the rows of rank-4 views: each (batch, head) pair's rows are one task.
void add_into(const Tensor& dst, const Tensor& src) {
  const Tensor d4 = attn::detail::as_rank4(dst), s4 = attn::detail::as_rank4(src);
  const int64_t heads = d4.dim(1), rows = d4.dim(2), width = d4.dim(3);
  parallel_for(d4.dim(0) * heads, [&](int64_t bh) {
    const int64_t b = bh / heads, h = bh % heads;
    float* to = const_cast<float*>(d4.data()) + b * d4.strides()[0] + h * d4.strides()[1];
    const float* from = s4.data() + b * s4.strides()[0] + h * s4.strides()[1];
    for (int64_t i = 0; i < rows; ++i) {
      float* row = to + i * d4.strides()[2];
      const float* add = from + i * s4.strides()[2];
      for (int64_t e = 0; e < width; ++e) row[e] += add[e];
    }
  });
}

int message_count(int64_t n, const char* what) {
  ATTN_CHECK(n <= INT_MAX, "ring_sdpa: ", what, " of ", n, " floats is more than one MPI ",
             "message carries (", INT_MAX, "); use more ranks");
  return static_cast<int>(n);
}

}  // namespace attn::distributed::detail
