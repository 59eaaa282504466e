// What one score's modification costs a fused attention kernel, in instructions: each kernel
// below evaluates a shipped modification's device form (cuda/attn/cuda/score_modification.cuh)
// once, at coordinates it is given, and bench/score_modification_sass.sh counts its sm_90 SASS
// against `baseline`, which does nothing but read the same parameters and store. Compiled only
// (nothing runs): static counts of straight-line code, which is what each score executes.
#include <attn/cuda/score_modification.cuh>
#include <attn/grad/fused_attention.hpp>

#include <cstdint>

namespace {

using B = attn::dim<"batch">;
using H = attn::dim<"heads">;
using Q = attn::dim<"queries">;
using K = attn::dim<"keys">;

enum class variant { alibi, soft_cap };

/// The modification's device form as fused_attention<cuda> makes it, over learned numbers a
/// head (16 heads over 4 sentences of 1024 tokens: sizes only matter past 2³² elements).
template <variant kind>
auto device_form(const float* learned) {
  const attn::extents<attn::shape<B, H, Q, K>> scores(4, 16, 1024, 1024);
  const attn::tensor_view<const float, attn::shape<H>, attn::cuda> x(learned, attn::extents<attn::shape<H>>(16));
  const auto alibi = [](const auto& s, const auto& slopes) {
    return s - attn::broadcast_like(slopes, s) * attn::abs(attn::index_along<Q>(s, 3.0f) - attn::index_along<K>(s));
  };
  const auto soft_cap = [](const auto& s, const auto& cap) {
    return attn::broadcast_like(cap, s) * attn::tanh(s / attn::broadcast_like(cap, s));
  };
  using S = attn::shape<B, H, Q, K>;
  if constexpr (kind == variant::alibi)
    return attn::cuda_backend::device_modification(
        attn::grad::detail::evaluate_modification_of<float, S, attn::cuda>(alibi, scores, {true}, x));
  else
    return attn::cuda_backend::device_modification(
        attn::grad::detail::evaluate_modification_of<float, S, attn::cuda>(soft_cap, scores, {true}, x));
}

using attn::cuda_backend::score_position;

__global__ void baseline(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, float s, float* out) {
  out[0] = s + float(b + h + i + j);
}

/// The forward's work a score: the modified score.
template <class M>
__global__ void score(M m, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, float s, float* out) {
  out[0] = m(score_position{{b, h, i, j}}, s);
}

/// The dQ kernel's work a score: the learned inputs' shares and the derivative by the score.
template <class M>
__global__ void gradient(M m, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, float s, float* out) {
  const score_position at{{b, h, i, j}};
  m.accumulate(at, s, 1.0f, out);
  out[16] = m.derivative(at, s);
}

}  // namespace

void launch_all(const float* learned, float* out) {
  const auto alibi = device_form<variant::alibi>(learned);
  const auto soft_cap = device_form<variant::soft_cap>(learned);
  baseline<<<1, 1>>>(1, 2, 3, 4, 0.5f, out);
  score<<<1, 1>>>(alibi, 1, 2, 3, 4, 0.5f, out);
  gradient<<<1, 1>>>(alibi, 1, 2, 3, 4, 0.5f, out);
  score<<<1, 1>>>(soft_cap, 1, 2, 3, 4, 0.5f, out);
  gradient<<<1, 1>>>(soft_cap, 1, 2, 3, 4, 0.5f, out);
}
