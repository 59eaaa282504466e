// Model configurations as types (paper Table 3), and the closed-form parameter count.
#pragma once

#include <string>
#include <string_view>

#include "../core/config.hpp"
#include "../core/dim.hpp"

namespace attn::nn {

/// Where layer normalisation sits around each sub-layer: LayerNorm(x + Sublayer(x)) as in the
/// paper (§3.1), or x + Sublayer(LayerNorm(x)) with a final LayerNorm on each stack.
enum class norm_placement { post, pre };

/// Sinusoidal encodings (§3.5), learned position embeddings (Table 3, row E), or none (for a
/// variant that puts positions into attention's scores, such as ALiBi).
enum class positional { sinusoidal, learned, none };

inline std::string_view to_string(positional p) {
  return p == positional::learned ? "learned" : p == positional::none ? "none" : "sinusoidal";
}

/// The widths of a model as dimensions: d_model, d_ff, h heads of d_k (queries, keys) and
/// d_v (values). heads·d_k need not equal d_model (Table 3, rows A and B).
template <index_t DModel, index_t DFF, index_t Heads, index_t DK, index_t DV>
struct widths {
  using d_model = dim<"d_model", DModel>;
  using d_ff = dim<"d_ff", DFF>;
  using heads = dim<"heads", Heads>;
  using d_k = dim<"d_k", DK>;
  using d_v = dim<"d_v", DV>;
  using query_width = dim<"heads_d_k", Heads * DK>;  // h·d_k: queries and keys, all heads
  using value_width = dim<"heads_d_v", Heads * DV>;  // h·d_v: values, all heads
};

/// Rows of a learned position table unless a configuration says otherwise.
inline constexpr index_t default_max_positions = 1024;

/// A configuration: widths, N layers and the training-time constants of §5.4. A row of
/// Table 3 derives from one and redefines what differs, e.g.
/// `struct my_row : config<widths<512, 2048, 8, 64, 64>> { static constexpr double dropout = 0.2; };`
template <class Widths, int Layers = 6>
struct config : Widths {
  static constexpr int layers = Layers;           // N
  static constexpr double dropout = 0.1;          // P_drop (§5.4)
  static constexpr double attention_dropout = 0;  // on attention weights: not in the paper (tensor2tensor's option)
  static constexpr double label_smoothing = 0.1;  // ε_ls (§5.4)
  static constexpr positional positions = positional::sinusoidal;
  static constexpr index_t max_positions = default_max_positions;  // rows of a learned position table
  static constexpr norm_placement norm = norm_placement::post;
  static constexpr bool tied_embeddings = true;  // one matrix for both embeddings and the output (§3.4)
  static constexpr double layer_norm_epsilon = 1e-6;
  // The attention variant: `template <class T, class C, class D> using attention = nn::alibi<T, C, D>;`
  // (nn/variant.hpp; the paper's when absent), and its "NAME[:ARG]" for run-time arguments.
  static constexpr std::string_view attention_spec = "";
};

/// What a model may take at run time instead of from its configuration type: N, P_drop, the
/// kind of positions (Table 3, rows C, D and E), the attention variant's name and argument
/// ("NAME[:ARG]", nn/variant.hpp; empty: the configuration's with its defaults) and dropout on
/// the attention weights. Shapes stay
/// compile-time; these do not change any, so a trainer compiled for one set of widths covers
/// those rows without another instantiation.
struct hyperparameters {
  int layers = 6;
  double dropout = 0.1;
  positional positions = positional::sinusoidal;
  std::string attention = {};
  double attention_dropout = 0;
};

/// The run-time hyperparameters that configuration C names.
template <class C>
constexpr hyperparameters defaults() {
  if constexpr (requires { std::string_view(C::attention_spec); })
    return {C::layers, C::dropout, C::positions, std::string(C::attention_spec), C::attention_dropout};
  else
    return {C::layers, C::dropout, C::positions, {}, C::attention_dropout};
}

/// The base model (Table 3, first row).
struct base : config<widths<512, 2048, 8, 64, 64>> {};

/// The big model (Table 3, last row).
struct big : config<widths<1024, 4096, 16, 64, 64>> {
  static constexpr double dropout = 0.3;
};

/// Small presets for CPUs and tests (not in the paper).
struct tiny : config<widths<128, 512, 4, 32, 32>, 2> {};
struct small : config<widths<256, 1024, 4, 64, 64>, 3> {};

/// Every row of Table 3 that changes the model (rows A–E; the base row is `base`).
namespace table3 {
// (A) number of heads and their widths, at constant computation.
struct a_1 : config<widths<512, 2048, 1, 512, 512>> {};
struct a_4 : config<widths<512, 2048, 4, 128, 128>> {};
struct a_16 : config<widths<512, 2048, 16, 32, 32>> {};
struct a_32 : config<widths<512, 2048, 32, 16, 16>> {};
// (B) smaller keys.
struct b_16 : config<widths<512, 2048, 8, 16, 64>> {};
struct b_32 : config<widths<512, 2048, 8, 32, 64>> {};
// (C) model size.
struct c_n2 : config<widths<512, 2048, 8, 64, 64>, 2> {};
struct c_n4 : config<widths<512, 2048, 8, 64, 64>, 4> {};
struct c_n8 : config<widths<512, 2048, 8, 64, 64>, 8> {};
struct c_d256 : config<widths<256, 2048, 8, 32, 32>> {};
struct c_d1024 : config<widths<1024, 2048, 8, 128, 128>> {};
struct c_ff1024 : config<widths<512, 1024, 8, 64, 64>> {};
struct c_ff4096 : config<widths<512, 4096, 8, 64, 64>> {};
// (D) regularisation.
struct d_drop0 : base {
  static constexpr double dropout = 0.0;
};
struct d_drop2 : base {
  static constexpr double dropout = 0.2;
};
struct d_ls0 : base {
  static constexpr double label_smoothing = 0.0;
};
struct d_ls2 : base {
  static constexpr double label_smoothing = 0.2;
};
// (E) learned positional embeddings instead of sinusoids.
struct e_learned : base {
  static constexpr positional positions = positional::learned;
};
}  // namespace table3

/// Number of trainable scalars of configuration C with a vocabulary of `vocab` tokens:
/// every projection has a bias, every LayerNorm a gain and a bias. The paper's attention: a
/// variant's own parameters and fewer key/value heads are not counted (parameters().count() is).
template <class C>
constexpr index_t parameter_count(index_t vocab, hyperparameters h = defaults<C>()) {
  const index_t d = C::d_model::extent, ff = C::d_ff::extent;
  const index_t qk = C::query_width::extent, v = C::value_width::extent;
  const index_t attention = 2 * (d * qk + qk) + (d * v + v) + (v * d + d);  // W^Q, W^K, W^V, W^O
  const index_t feed_forward = (d * ff + ff) + (ff * d + d);                // eq. (2)
  const index_t norm = 2 * d;
  const index_t encoder_layer = attention + feed_forward + 2 * norm;
  const index_t decoder_layer = 2 * attention + feed_forward + 3 * norm;
  const index_t embeddings = (C::tied_embeddings ? 1 : 3) * vocab * d;
  const index_t positions = h.positions == positional::learned ? 2 * C::max_positions * d : 0;
  const index_t final_norms = C::norm == norm_placement::pre ? 2 * norm : 0;
  return h.layers * (encoder_layer + decoder_layer) + embeddings + positions + final_norms;
}

}  // namespace attn::nn
