// Packed variable-length batches (attn/sdpa_varlen.hpp): every sequence equal to attn::sdpa and
// sdpa_backward on it alone — bitwise for the fused path's shapes — causal and not, GQA,
// Tq ≠ Tk per sequence, empty sequences, keys in use (key_lengths), the variants; 1 and 2 threads
// bitwise; the errors.
#include "attn/sdpa_varlen.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attn/random.hpp"
#include "attn/threads.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::BitwiseEqual;
using testing::ThrowsWith;

// Rows [first, first + n) of a packed (total, H, w) tensor as one sequence's (1, H, n, w).
Tensor sequence_alone(const Tensor& packed, int64_t first, int64_t n) {
  return packed.slice(first, n).permute({1, 0, 2}).contiguous().reshape(
      {1, packed.dim(1), n, packed.dim(2)});
}

// A (1, H, n, w) result back as (n, H, w).
Tensor as_packed(const Tensor& t) {
  return t.reshape({t.dim(1), t.dim(2), t.dim(3)}).permute({1, 0, 2}).contiguous();
}

struct VarlenCase {
  const char* name;
  std::vector<int64_t> lengths_q, lengths_k;
  int64_t heads, kv_heads, d;
  SdpaOptions options;
};

std::vector<int64_t> offsets_of(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu{0};
  for (int64_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

void CheckEachSequenceAlone(const VarlenCase& c) {
  SCOPED_TRACE(c.name);
  const std::vector<int64_t> cu_q = offsets_of(c.lengths_q), cu_k = offsets_of(c.lengths_k);
  const Tensor q = rand_normal({cu_q.back(), c.heads, c.d}, 1);
  const Tensor k = rand_normal({cu_k.back(), c.kv_heads, c.d}, 2);
  const Tensor v = rand_normal({cu_k.back(), c.kv_heads, c.d}, 3);
  const Tensor g = rand_normal({cu_q.back(), c.heads, c.d}, 4);
  const SdpaResult packed = sdpa_varlen(q, k, v, cu_q, cu_k, c.options);
  const SdpaGradients grads =
      sdpa_varlen_backward(q, k, v, packed.output, packed.logsumexp, g, cu_q, cu_k, c.options);
  std::vector<double> dsinks(static_cast<size_t>(c.heads), 0.0);
  // Each sequence alone sees only its keys in use; key_lengths is the packed call's alone.
  SdpaOptions alone = c.options;
  alone.key_lengths.clear();
  const auto zeros = [](const Tensor& packed_rows, int64_t first, int64_t count) {
    if (count == 0) return ::testing::AssertionSuccess();
    const Tensor rows = packed_rows.slice(first, count);
    return testing::AllClose(rows, Tensor(rows.shape()), 0.0);
  };
  for (size_t s = 0; s + 1 < cu_q.size(); ++s) {
    const int64_t q0 = cu_q[s], lq = cu_q[s + 1] - q0, k0 = cu_k[s], slot = cu_k[s + 1] - k0;
    const int64_t lk = c.options.key_lengths.empty() ? slot : c.options.key_lengths[s];
    SCOPED_TRACE("sequence " + std::to_string(s));
    // The slot's rows past those in use: no output read them (the tensors are not zeroed up
    // front).
    EXPECT_TRUE(zeros(grads.dk, k0 + lk, slot - lk));
    EXPECT_TRUE(zeros(grads.dv, k0 + lk, slot - lk));
    if (lq == 0 || lk == 0) {  // nothing attends: zeros
      EXPECT_TRUE(zeros(packed.output, q0, lq));
      EXPECT_TRUE(zeros(grads.dq, q0, lq));
      EXPECT_TRUE(zeros(grads.dk, k0, lk));
      EXPECT_TRUE(zeros(grads.dv, k0, lk));
      continue;
    }
    const Tensor q_s = sequence_alone(q, q0, lq), k_s = sequence_alone(k, k0, lk),
                 v_s = sequence_alone(v, k0, lk);
    const SdpaResult one = sdpa(q_s, k_s, v_s, alone);
    const SdpaGradients one_grads =
        sdpa_backward(q_s, k_s, v_s, one.output, one.logsumexp, sequence_alone(g, q0, lq), alone);
    // sdpa alone takes the same kernel — the fused forward, or the decode kernel for a few rows
    // at the end of the keys — so the bits agree (the backward's too, from the same output).
    const auto same = [](const Tensor& a, const Tensor& b) { return BitwiseEqual(a, b); };
    EXPECT_TRUE(same(packed.output.slice(q0, lq), as_packed(one.output)));
    EXPECT_TRUE(same(packed.logsumexp.slice(q0, lq),
                     one.logsumexp.reshape({c.heads, lq}).permute({1, 0}).contiguous()));
    EXPECT_TRUE(same(grads.dq.slice(q0, lq), as_packed(one_grads.dq)));
    EXPECT_TRUE(same(grads.dk.slice(k0, lk), as_packed(one_grads.dk)));
    EXPECT_TRUE(same(grads.dv.slice(k0, lk), as_packed(one_grads.dv)));
    for (int64_t h = 0; one_grads.dsinks.defined() && h < c.heads; ++h)
      dsinks[static_cast<size_t>(h)] += one_grads.dsinks.data()[h];
  }
  if (!c.options.sinks.empty()) {
    for (int64_t h = 0; h < c.heads; ++h)
      EXPECT_NEAR(grads.dsinks.data()[h], dsinks[static_cast<size_t>(h)], 1e-4) << "head " << h;
  }
}

TEST(SdpaVarlen, EachSequenceIsTheSameAsAlone) {
  SdpaOptions causal = testing::causal(), window, variants = testing::causal();
  window.window = 20;
  window.causal = true;
  SdpaOptions in_use = testing::causal();  // seqused_k: slots longer than what they hold
  in_use.key_lengths = {250, 0, 130, 3};
  SdpaOptions decode_in_use = testing::causal();
  decode_in_use.key_lengths = {513, 77};
  variants.softcap = 2.0f;
  variants.alibi_slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  variants.sinks = {0.5f, -1.0f, 0.0f, 2.0f};
  const VarlenCase cases[] = {
      {"causal, mixed lengths",
       {300, 17, 130, 64, 1, 500},
       {300, 17, 130, 64, 1, 500},
       4,
       4,
       32,
       causal},
      {"not causal, Tq != Tk, GQA", {40, 70, 5}, {90, 70, 33}, 4, 2, 24, SdpaOptions{}},
      {"empty sequences", {0, 50, 0, 20}, {10, 50, 0, 20}, 4, 1, 16, causal},
      {"sliding window", {200, 33}, {200, 33}, 4, 2, 16, window},
      {"softcap, ALiBi, sinks", {150, 20, 77}, {150, 20, 77}, 4, 2, 32, variants},
      {"keys in use (key_lengths)", {40, 5, 130, 1}, {300, 17, 130, 64}, 4, 2, 32, in_use},
      // a few queries at the end of long slots: the decode kernel at the packed rows' stride
      {"decode steps", {1, 3, 1, 15}, {700, 300, 129, 40}, 4, 2, 64, causal},
      {"decode steps in longer slots", {1, 2}, {900, 600}, 4, 4, 64, decode_in_use},
      // Slots of 8 and more chunks of the decode kernel: one task reads every head's rows of a
      // chunk (decode_chunk_all_heads); alone, the contiguous copy goes head by head.
      {"decode steps, every head's rows in one task", {1, 2}, {4500, 5000}, 4, 2, 16, causal},
      {"the same with a window", {2, 1}, {4600, 4100}, 4, 4, 16, window},
      {"the same with softcap, ALiBi, sinks", {1, 3}, {4097, 5000}, 4, 2, 16, variants},
  };
  for (const VarlenCase& c : cases) CheckEachSequenceAlone(c);
  // bf16 products: on a CPU with AMX (or vdpbf16ps), K and V are packed from the packed rows
  // in place rather than from a head-major copy; the bits are still each sequence's alone.
  for (VarlenCase c : cases) {
    SCOPED_TRACE("bf16 products");
    c.options.precision = Dtype::kBFloat16;
    CheckEachSequenceAlone(c);
  }
}

TEST(SdpaVarlen, OneAndTwoThreadsGiveTheSameBits) {
  const std::vector<int64_t> cu{0, 300, 317, 700};
  const Tensor q = rand_normal({700, 4, 32}, 1), k = rand_normal({700, 2, 32}, 2),
               v = rand_normal({700, 2, 32}, 3), g = rand_normal({700, 4, 32}, 4);
  SdpaResult r[2];
  SdpaGradients grads[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    r[threads - 1] = sdpa_varlen(q, k, v, cu, cu, testing::causal());
    grads[threads - 1] = sdpa_varlen_backward(
        q, k, v, r[threads - 1].output, r[threads - 1].logsumexp, g, cu, cu, testing::causal());
  }
  set_num_threads(0);
  EXPECT_TRUE(BitwiseEqual(r[0].output, r[1].output));
  EXPECT_TRUE(BitwiseEqual(grads[0].dq, grads[1].dq));
  EXPECT_TRUE(BitwiseEqual(grads[0].dk, grads[1].dk));
}

TEST(SdpaVarlen, BadArgumentsAreClearErrors) {
  const Tensor q = rand_normal({10, 2, 8}, 1), k = rand_normal({10, 2, 8}, 2);
  auto call = [&](std::vector<int64_t> cu_q, std::vector<int64_t> cu_k, SdpaOptions o = {}) {
    return [=] { sdpa_varlen(q, k, k, cu_q, cu_k, o); };
  };
  EXPECT_TRUE(ThrowsWith(call({0, 4, 9}, {0, 4, 10}), "cu_seqlens_q must run from 0 to 10"));
  EXPECT_TRUE(ThrowsWith(call({0, 6, 4, 10}, {0, 6, 4, 10}), "must not decrease"));
  EXPECT_TRUE(ThrowsWith(call({0, 10}, {0, 4, 10}), "one sequence each"));
  EXPECT_TRUE(ThrowsWith(call({0}, {0}), "at least 2 offsets"));
  SdpaOptions masked;
  masked.key_starts = {3};
  EXPECT_TRUE(ThrowsWith(call({0, 10}, {0, 10}, masked), "masks, key_starts"));
  SdpaOptions sinks;  // one sink for two heads: refused before the keyless sequence reads them
  sinks.sinks = {0.5f};
  EXPECT_TRUE(ThrowsWith([&] { sdpa_varlen(q, k, k, {0, 10, 10}, {0, 0, 10}, sinks); }, "sinks"));
  SdpaOptions in_use;
  in_use.key_lengths = {3};
  EXPECT_TRUE(ThrowsWith(call({0, 4, 10}, {0, 4, 10}, in_use), "one each"));
  in_use.key_lengths = {3, 7};
  EXPECT_TRUE(ThrowsWith(call({0, 4, 10}, {0, 4, 10}, in_use),
                         "key_lengths[1] = 7 must be from 0 to the 6 key rows"));
  in_use.key_lengths = {-1, 0};
  EXPECT_TRUE(ThrowsWith(call({0, 4, 10}, {0, 4, 10}, in_use), "key_lengths[0] = -1"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_varlen(rand_normal({10, 8}, 1), k, k, {0, 10}, {0, 10});
      },
      "must be packed (total, heads, d)"));
}

// The keys of a paged cache (pages, page_size, Hkv, d) laid end to end: sequence s's first
// used[s] positions, read through its row of the table.
Tensor end_to_end(const Tensor& pages, const std::vector<std::vector<int64_t>>& table,
                  const std::vector<int64_t>& used) {
  const int64_t page_size = pages.dim(1);
  const std::vector<int64_t> cu = offsets_of(used);
  Tensor rows({cu.back(), pages.dim(2), pages.dim(3)});
  for (size_t s = 0; s < used.size(); ++s) {
    for (int64_t j = 0; j < used[s]; ++j) {
      const int64_t page = table[s][static_cast<size_t>(j / page_size)];
      rows.slice(cu[s] + j, 1).copy_from(pages.select(page).slice(j % page_size, 1));
    }
  }
  return rows;
}

// A paged cache: every sequence bitwise sdpa_varlen on its pages gathered into packed rows —
// decode steps read in place (pages of 48 tokens, so a key block of the decode kernel crosses
// pages; of 256, so it does not), prompts gathered, an empty sequence, GQA, a window, sinks.
TEST(SdpaVarlenPaged, EachSequenceIsItsPagesGathered) {
  for (const int64_t page_size : {48, 256}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    const int64_t pages = 3000 / page_size + 8, heads = 4, kv_heads = 2, d = 64;
    const Tensor k_pages = rand_normal({pages, page_size, kv_heads, d}, 7),
                 v_pages = rand_normal({pages, page_size, kv_heads, d}, 8);
    const std::vector<int64_t> lengths_q{1, 3, 40, 1, 2}, used{700, 1100, 90, 0, 129};
    // Pages in a shuffled order, the first two sequences sharing their first page.
    std::vector<std::vector<int64_t>> table;
    int64_t next = 1;
    for (size_t s = 0; s < used.size(); ++s) {
      std::vector<int64_t> row;
      for (int64_t j = 0; j < (used[s] + page_size - 1) / page_size; ++j)
        row.push_back(s < 2 && j == 0 ? 0 : (next++ * 7) % pages);
      table.push_back(row);
    }
    const std::vector<int64_t> cu_q = offsets_of(lengths_q), cu_k = offsets_of(used);
    const Tensor q = rand_normal({cu_q.back(), heads, d}, 9);
    const Tensor k = end_to_end(k_pages, table, used), v = end_to_end(v_pages, table, used);
    SdpaOptions window = testing::causal(), sinks = testing::causal();
    window.window = 300;
    sinks.sinks = {0.5f, -1.0f, 0.0f, 2.0f};
    for (const SdpaOptions& o : {testing::causal(), window, sinks}) {
      const SdpaResult paged = sdpa_varlen_paged(q, k_pages, v_pages, cu_q, table, used, o);
      const SdpaResult packed = sdpa_varlen(q, k, v, cu_q, cu_k, o);
      EXPECT_TRUE(BitwiseEqual(paged.output, packed.output));
      EXPECT_TRUE(BitwiseEqual(paged.logsumexp, packed.logsumexp));
    }
  }
}

// Long sequences' decode steps read every head's rows of a chunk in one task, the rows of a
// block looked up key by key where it crosses a page (pages of 48): bitwise the same keys laid
// end to end, whose blocks are consecutive rows.
TEST(SdpaVarlenPaged, LongSequencesReadAllHeadsOfAPageRowAtOnce) {
  for (const int64_t page_size : {48, 256}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    const std::vector<int64_t> lengths_q{1, 2}, used{4500, 5000};
    const int64_t kv_heads = 2, d = 16,
                  pages = (used[0] + used[1]) / page_size + 4;  // room for every sequence
    const Tensor k_pages = rand_normal({pages, page_size, kv_heads, d}, 7),
                 v_pages = rand_normal({pages, page_size, kv_heads, d}, 8);
    std::vector<std::vector<int64_t>> table(used.size());
    int64_t next = 0;
    for (size_t s = 0; s < used.size(); ++s) {  // pages taken from the end backwards
      for (int64_t j = 0; j < (used[s] + page_size - 1) / page_size; ++j)
        table[s].push_back(pages - 1 - next++);
    }
    const std::vector<int64_t> cu_q = offsets_of(lengths_q), cu_k = offsets_of(used);
    const Tensor q = rand_normal({cu_q.back(), 4, d}, 9);
    const Tensor k = end_to_end(k_pages, table, used), v = end_to_end(v_pages, table, used);
    const SdpaResult paged =
        sdpa_varlen_paged(q, k_pages, v_pages, cu_q, table, used, testing::causal());
    const SdpaResult packed = sdpa_varlen(q, k, v, cu_q, cu_k, testing::causal());
    EXPECT_TRUE(BitwiseEqual(paged.output, packed.output));
    EXPECT_TRUE(BitwiseEqual(paged.logsumexp, packed.logsumexp));
    // A NaN in a row read row by row across the heads: named, in the paged and the packed call.
    Tensor v_bad = v_pages.contiguous();
    v_bad.at({table[1][table[1].size() / 2], 5, 1, 3}) = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(ThrowsWith(
        [&] { sdpa_varlen_paged(q, k_pages, v_bad, cu_q, table, used, testing::causal()); },
        "holds NaN"));
    Tensor k_bad = k.clone();
    k_bad.at({cu_k[1] + 4321, 0, 15}) = std::numeric_limits<float>::infinity();
    EXPECT_TRUE(
        ThrowsWith([&] { sdpa_varlen(q, k_bad, v, cu_q, cu_k, testing::causal()); }, "holds inf"));
  }
}

TEST(SdpaVarlenPaged, ANonFiniteRowIsRefusedOnlyWhereItIsRead) {
  Tensor k_pages = rand_normal({4, 64, 1, 16}, 1);
  const Tensor v_pages = rand_normal({4, 64, 1, 16}, 2), q = rand_normal({1, 1, 16}, 3);
  k_pages.at({3, 10, 0, 4}) = std::numeric_limits<float>::quiet_NaN();  // page 3, unread
  const SdpaResult fine =
      sdpa_varlen_paged(q, k_pages, v_pages, {0, 1}, {{2, 0}}, {100}, testing::causal());
  for (float x : fine.output.to_vector()) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_varlen_paged(q, k_pages, v_pages, {0, 1}, {{2, 3}}, {100}, testing::causal());
      },
      "k_pages or v_pages holds NaN"));
}

TEST(SdpaVarlenPaged, BadArgumentsAreClearErrors) {
  const Tensor pages = rand_normal({3, 8, 2, 16}, 1), q = rand_normal({4, 2, 16}, 2);
  auto call = [&](std::vector<std::vector<int64_t>> table, std::vector<int64_t> used) {
    return [=] { sdpa_varlen_paged(q, pages, pages, {0, 1, 4}, table, used); };
  };
  EXPECT_TRUE(ThrowsWith(call({{0}}, {3}), "one each"));
  EXPECT_TRUE(ThrowsWith(call({{0}, {1}}, {3, 9}), "seqused_k[1] = 9 does not fit in the 1 pages"));
  EXPECT_TRUE(ThrowsWith(call({{0}, {3}}, {3, 2}), "block_table[1][0] = 3 is outside the 3 pages"));
  SdpaOptions sinks;  // one sink for two heads: refused before the empty sequences read them
  sinks.sinks = {0.5f};
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_varlen_paged(q, pages, pages, {0, 1, 4}, {{}, {}}, {0, 0}, sinks);
      },
      "sinks"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_varlen_paged(q, q, q, {0, 4}, {{0}}, {1});
      },
      "k_pages, v_pages (pages, page_size, kv_heads, d)"));
}

}  // namespace
}  // namespace attn
