// The dimensions the model's activations are named by. Model widths come from the
// configuration (config.hpp); these are the ones whose sizes come from the data.
#pragma once

#include <cstdint>

#include "../core/dim.hpp"

namespace attn::nn {

using batch = dim<"batch">;          // sentences in a batch
using src = dim<"src">;              // source positions
using tgt = dim<"tgt">;              // target positions
using keys = dim<"keys">;            // positions attended to: a second name, so scores are [.., queries, keys]
using vocab = dim<"vocab">;          // tokens of the (shared) vocabulary
using positions = dim<"positions">;  // rows of a learned position table

/// Token ids.
using token = std::int32_t;

}  // namespace attn::nn
