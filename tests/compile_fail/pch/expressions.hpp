// The headers the expression-layer cases include (dims.hpp's), precompiled once (meson.build).
#include <attn/core.hpp>
#include <attn/expr.hpp>
