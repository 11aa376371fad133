// The whole public API in one include.
#pragma once

#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/io.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mask.hpp"
#include "attn/matmul.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/tensor.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "attn/viz.hpp"
#include "attn/walkthrough.hpp"
