// The cumulative offsets of a packed batch (cu_seqlens), checked alike by sdpa_varlen and
// sdpa_varlen_paged. Internal to the library.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/error.hpp"

namespace attn::detail {

// Offsets: N + 1 of them, from 0, never decreasing, ending at the packed length `total`; an
// attn::Error starting with `where` and naming the offsets otherwise.
inline void check_offsets(const std::vector<int64_t>& cu, int64_t total, const char* where,
                          const char* name) {
  ATTN_CHECK(cu.size() >= 2, where, ": ", name, " needs at least 2 offsets (0 and the total), got ",
             cu.size());
  ATTN_CHECK(cu.front() == 0 && cu.back() == total, where, ": ", name, " must run from 0 to ",
             total, " (the packed rows), got ", cu.front(), " … ", cu.back());
  for (size_t s = 1; s < cu.size(); ++s) {
    ATTN_CHECK(cu[s] >= cu[s - 1], where, ": ", name, " must not decrease: ", cu[s - 1], " then ",
               cu[s]);
  }
}

}  // namespace attn::detail
