// DataParallel: the gradient sums of data-parallel training, bucket by bucket while the
// backward pass runs (PyTorch DDP's design, on MPI_Iallreduce).
//
// The backward pass finishes the gradient buffer from its end (ln_f, then the last block,
// …, the embeddings last: include/attn/gpt.hpp), so the finished part is always a suffix
// [final_from, end). A bucket starts its sum as soon as that suffix holds bucket_bytes more
// than the buckets already started; the rest goes when the pass is done. Each call also
// polls the sums in flight, which is when MPI moves them on. Bucket size: small enough that
// the first sum starts early in the pass (the baby GPT's 3.2 MB of gradients make four
// buckets of a block each), large enough that the per-message latency (~10 µs on shared
// memory) stays out of the way (GPT-2 small's 500 MB make ~480).
//
// Every rank gets the same bits: Open MPI's allreduce algorithms combine the ranks' values in
// one order for everyone, and Trainer::replicas_agree checks it during training.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "attn/distributed.hpp"
#include "attn/error.hpp"

namespace attn::distributed {

DataParallel::DataParallel(Communicator comm, int64_t bucket_bytes)
    : comm_(comm), bucket_floats_(bucket_bytes / static_cast<int64_t>(sizeof(float))) {
  ATTN_CHECK(bucket_floats_ >= 1 && bucket_floats_ <= INT_MAX,
             "DataParallel: bucket_bytes must be from 4 to ", int64_t{INT_MAX} * 4, ", got ",
             bucket_bytes);
}

// Sums still in flight here mean an exception unwound a step (a Timeout, say): the job is
// ending (the CLI calls MPI_Abort), and a nonblocking collective can be neither cancelled nor
// freed, so they are left to MPI.
DataParallel::~DataParallel() = default;

void DataParallel::start_gradients(std::span<float> gradients) {
  ATTN_CHECK(requests_.empty(), "DataParallel: start_gradients before the last sums finished");
  gradients_ = gradients;
  pending_end_ = static_cast<int64_t>(gradients.size());
}

void DataParallel::start_bucket(int64_t begin, int64_t end) {
  // A bucket larger than bucket_bytes (a single huge layer) goes in pieces of that size.
  for (int64_t at = begin; at < end; at += bucket_floats_) {
    comm_.start_sum(gradients_.subspan(static_cast<size_t>(at),
                                       static_cast<size_t>(std::min(bucket_floats_, end - at))),
                    requests_);
    ++buckets_started_;
  }
}

void DataParallel::gradients_final_from(int64_t offset) {
  ATTN_CHECK(offset >= 0 && offset <= pending_end_, "DataParallel: gradients final from ", offset,
             " after ", pending_end_);
  if (pending_end_ - offset >= bucket_floats_ || (offset == 0 && pending_end_ > 0)) {
    start_bucket(offset, pending_end_);
    pending_end_ = offset;
  }
  comm_.poll(requests_);
}

void DataParallel::finish_gradients() {
  if (pending_end_ > 0) gradients_final_from(0);
  const auto start = std::chrono::steady_clock::now();
  comm_.wait(requests_, "the gradient sum");
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  requests_.clear();
}

bool DataParallel::same_on_every_rank(std::span<const float> values) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the bytes' 32-bit words
  for (const float x : values) {
    uint32_t word;
    std::memcpy(&word, &x, sizeof word);
    h = (h ^ word) * 0x100000001b3ull;
  }
  const std::vector<int64_t> all = comm_.gather_all(static_cast<int64_t>(h), "the parameter check");
  for (const int64_t other : all) {
    if (other != all.front()) return false;
  }
  return true;
}

}  // namespace attn::distributed
