#include "attn/version.hpp"

namespace attn {

const char* version() { return ATTN_VERSION_STRING; }

}  // namespace attn
