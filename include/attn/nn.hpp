// The model of paper §3: attention, feed-forward, LayerNorm, residuals, embeddings, positions,
// encoder and decoder stacks, and configurations as types.
#pragma once

#include "nn/attention.hpp"
#include "nn/config.hpp"
#include "nn/context.hpp"
#include "nn/decoder.hpp"
#include "nn/dims.hpp"
#include "nn/embedding.hpp"
#include "nn/encoder.hpp"
#include "nn/feed_forward.hpp"
#include "nn/init.hpp"
#include "nn/layer_norm.hpp"
#include "nn/linear.hpp"
#include "nn/masks.hpp"
#include "nn/precision.hpp"
#include "nn/residual.hpp"
#include "nn/transformer.hpp"
#include "nn/variant.hpp"
#include "nn/variants.hpp"
