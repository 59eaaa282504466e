// Whole expressions of the model against host loops: softmax (plain, masked, causal),
// log-softmax, LayerNorm, a deep elementwise tree, and multi-head attention end to end
// (projections, head split, Q·Kᵀ, masked softmax, P·V, head merge), each an assignment.
#include "gpu_test.cuh"

#include <string>
#include <vector>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;

using batch = attn::dim<"batch">;
using heads = attn::dim<"heads">;
using len = attn::dim<"len">;
using src = attn::dim<"src">;
using feat = attn::dim<"feat">;
using model = attn::dim<"d_model", 12>;
using proj = attn::dim<"proj", 12>;
using h3 = attn::dim<"h", 3>;
using k4 = attn::dim<"d_k", 4>;

template <class T>
std::string type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

/// Softmax over the last dimension of rows given as f(j), j in [0, n).
template <class F>
std::vector<double> softmax_row(index_t n, F&& f) {
  double m = -std::numeric_limits<double>::infinity();
  for (index_t j = 0; j < n; ++j) m = std::max(m, f(j));
  std::vector<double> e(static_cast<std::size_t>(n));
  double z = 0;
  for (index_t j = 0; j < n; ++j) z += e[static_cast<std::size_t>(j)] = std::exp(f(j) - m);
  for (auto& v : e) v /= z;
  return e;
}

template <class T>
void softmaxes(index_t B, index_t H, index_t L, index_t S) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " [" + std::to_string(B) + "," + std::to_string(H) + "," +
                           std::to_string(L) + "," + std::to_string(S) + "]";
  const extents<shape<batch, heads, len, src>> sizes(B, H, L, S);
  const auto hx = random_host<T>(sizes, -4.0, 4.0);
  const auto x = upload(hx);

  // §3.2.1: softmax over the keys, shifted by the row maximum for range.
  const auto shifted = x - attn::broadcast_like(attn::max<src>(x), x);
  const auto softmax = attn::exp(shifted) / attn::broadcast_like(attn::sum<src>(attn::exp(shifted)), x);
  check("softmax" + size + t, softmax, [&](auto i) {
    return softmax_row(S, [&](index_t s) { return at(hx, {i[0], i[1], i[2], s}); })[static_cast<std::size_t>(i[3])];
  });

  const auto log_softmax =
      shifted - attn::broadcast_like(attn::log(attn::sum<src>(attn::exp(shifted))), x);
  check("log-softmax" + size + t, log_softmax, [&](auto i) {
    return std::log(
        softmax_row(S, [&](index_t s) { return at(hx, {i[0], i[1], i[2], s}); })[static_cast<std::size_t>(i[3])]);
  });

  // Padding mask [batch, src] (keep at least one key per row) and causal mask [len, src].
  auto hpad = random_host<bool>(extents<shape<batch, src>>(B, S));
  for (index_t b = 0; b < B; ++b) hpad.data()[b * S] = true;
  attn::tensor<bool, shape<len, src>, attn::cpu> hcausal(extents<shape<len, src>>(L, S));
  for (index_t l = 0; l < L; ++l)
    for (index_t s = 0; s < S; ++s) hcausal.data()[l * S + s] = s <= l;
  const auto pad = upload(hpad);
  const auto causal = upload(hcausal);

  const auto masked = attn::where(attn::broadcast_like(pad, x), x, -1e9);
  const auto masked_shift = masked - attn::broadcast_like(attn::max<src>(masked), x);
  check("padding-masked softmax" + size + t,
        attn::exp(masked_shift) / attn::broadcast_like(attn::sum<src>(attn::exp(masked_shift)), x), [&](auto i) {
          return softmax_row(S, [&](index_t s) {
            return at(hpad, {i[0], s}) != 0 ? at(hx, {i[0], i[1], i[2], s}) : -1e9;
          })[static_cast<std::size_t>(i[3])];
        });

  const auto future = attn::where(attn::broadcast_like(causal, x), x, -1e9);
  const auto future_shift = future - attn::broadcast_like(attn::max<src>(future), x);
  check("causal-masked softmax" + size + t,
        attn::exp(future_shift) / attn::broadcast_like(attn::sum<src>(attn::exp(future_shift)), x), [&](auto i) {
          return softmax_row(S, [&](index_t s) {
            return s <= i[2] ? at(hx, {i[0], i[1], i[2], s}) : -1e9;
          })[static_cast<std::size_t>(i[3])];
        });
}

/// §3.1's LayerNorm over the features, in one assignment.
template <class T>
void layer_norm(index_t B, index_t L, index_t F) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " [" + std::to_string(B) + "," + std::to_string(L) + "," + std::to_string(F) + "]";
  const auto hx = random_host<T>(extents<shape<batch, len, feat>>(B, L, F), -3.0, 5.0);
  const auto hg = random_host<T>(extents<shape<feat>>(F), 0.5, 1.5);
  const auto hb = random_host<T>(extents<shape<feat>>(F));
  const auto x = upload(hx);
  const auto gamma = upload(hg);
  const auto beta = upload(hb);
  const double eps = 1e-5;

  const auto centred = x - attn::broadcast_like(attn::mean<feat>(x), x);
  const auto normalised =
      centred * attn::broadcast_like(attn::rsqrt(attn::mean<feat>(centred * centred) + eps), x);
  const auto y = normalised * attn::broadcast_like(gamma, x) + attn::broadcast_like(beta, x);
  check("LayerNorm" + size + t, y, [&](auto i) {
    double mu = 0;
    for (index_t f = 0; f < F; ++f) mu += at(hx, {i[0], i[1], f});
    mu /= static_cast<double>(F);
    double var = 0;
    for (index_t f = 0; f < F; ++f) var += (at(hx, {i[0], i[1], f}) - mu) * (at(hx, {i[0], i[1], f}) - mu);
    var /= static_cast<double>(F);
    return (at(hx, i) - mu) / std::sqrt(var + eps) * at(hg, {i[2]}) + at(hb, {i[2]});
  });
}

/// A deep tree: each level reads the level below twice, 8 levels, one kernel.
template <class T>
void deep_tree() {
  const std::string t = "/" + type_name<T>();
  const extents<shape<batch, len>> sizes(5, 37);
  const auto hx = random_host<T>(sizes);
  const auto hy = random_host<T>(sizes);
  const auto x = upload(hx);
  const auto y = upload(hy);
  auto level = [&](const auto& e) { return attn::tanh(e) * y + e * 0.5; };
  const auto tree = level(level(level(level(level(level(level(level(x))))))));
  check("8-level tree" + t, tree, [&](auto i) {
    double v = at(hx, i);
    for (int k = 0; k < 8; ++k) v = std::tanh(v) * at(hy, i) + v * 0.5;
    return v;
  });
}

/// Multi-head attention (§3.2.2) on [batch, len, d_model=12] with 3 heads of d_k = 4.
template <class T>
void multi_head_attention(index_t B, index_t L, index_t S) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " batch=" + std::to_string(B) + " len=" + std::to_string(L) + " src=" + std::to_string(S);
  const auto hx = random_host<T>(extents<shape<batch, len, model>>(B, L));
  const auto hm = random_host<T>(extents<shape<batch, src, model>>(B, S));  // encoder memory
  const double w = 1.0 / std::sqrt(12.0);
  const auto hwq = random_host<T>(extents<shape<model, proj>>(), -w, w);
  const auto hwk = random_host<T>(extents<shape<model, proj>>(), -w, w);
  const auto hwv = random_host<T>(extents<shape<model, proj>>(), -w, w);
  auto hpad = random_host<bool>(extents<shape<batch, src>>(B, S));
  for (index_t b = 0; b < B; ++b) hpad.data()[b * S + S - 1] = true;
  const auto x = upload(hx);
  const auto mem = upload(hm);
  const auto wq = upload(hwq);
  const auto wk = upload(hwk);
  const auto wv = upload(hwv);
  const auto pad = upload(hpad);

  guard_exceptions("multi-head attention" + size + t, [&] {
    // Projections, split into heads, heads before positions: [batch, h, len, d_k].
    auto heads_of = [](const auto& projected) {
      return attn::permute<batch, h3, len, k4>(attn::split<proj, h3, k4>(projected));
    };
    const attn::tensor<T, shape<batch, h3, len, k4>, device> q(heads_of(attn::contract<model>(x, wq)));
    const attn::tensor<T, shape<batch, h3, src, k4>, device> k(
        attn::rename<len, src>(heads_of(attn::rename<src, len>(attn::contract<model>(mem, wk)))));
    const attn::tensor<T, shape<batch, h3, src, k4>, device> v(
        attn::rename<len, src>(heads_of(attn::rename<src, len>(attn::contract<model>(mem, wv)))));

    // Equation (1): softmax(Q·Kᵀ / √d_k) V, padded keys masked.
    const auto scores = attn::contract<k4>(q, k) * (1.0 / std::sqrt(4.0));
    const attn::tensor<T, shape<batch, h3, len, src>, device> masked(
        attn::where(attn::broadcast<shape<batch, h3, len, src>>(pad, scores.extents()), scores, -1e9));
    const auto shifted = masked - attn::broadcast_like(attn::max<src>(masked), masked);
    const attn::tensor<T, shape<batch, h3, len, src>, device> p(
        attn::exp(shifted) / attn::broadcast_like(attn::sum<src>(attn::exp(shifted)), masked));
    const auto heads_out = attn::contract<src>(p, v);  // [batch, h, len, d_k]
    guarded<T, shape<batch, len, proj>> out(extents<shape<batch, len, proj>>(B, L));
    out.view() = attn::merge<h3, k4, proj>(attn::permute<batch, len, h3, k4>(heads_out));
    settle("multi-head attention");

    // The same on the host, in double.
    auto project = [](const auto& in, const auto& weights, index_t b, index_t pos, index_t o) {
      double acc = 0;
      for (index_t d = 0; d < 12; ++d) acc += at(in, {b, pos, d}) * at(weights, {d, o});
      return acc;
    };
    const auto ref = reference(extents<shape<batch, len, proj>>(B, L), [&](auto i) {
      const index_t b = i[0], l = i[1], h = i[2] / 4, d = i[2] % 4;
      std::vector<double> logits(static_cast<std::size_t>(S));
      for (index_t s = 0; s < S; ++s) {
        double dot = 0;
        for (index_t e = 0; e < 4; ++e)
          dot += project(hx, hwq, b, l, h * 4 + e) * project(hm, hwk, b, s, h * 4 + e);
        logits[static_cast<std::size_t>(s)] = at(hpad, {b, s}) != 0 ? dot / 2.0 : -1e9;
      }
      const auto weights = softmax_row(S, [&](index_t s) { return logits[static_cast<std::size_t>(s)]; });
      double acc = 0;
      for (index_t s = 0; s < S; ++s)
        acc += weights[static_cast<std::size_t>(s)] * project(hm, hwv, b, s, h * 4 + d);
      return acc;
    });
    compare_guarded("multi-head attention" + size + t, out, ref);
  });
}

}  // namespace

int main() {
  if (const int skip = skip_without_device(); skip != 0) return skip;
  try {
    softmaxes<float>(2, 3, 7, 5);
    softmaxes<double>(2, 3, 7, 5);
    softmaxes<float>(1, 1, 1, 1);
    softmaxes<float>(3, 2, 9, 1500);  // rows longer than 1024: a block per row
    layer_norm<float>(2, 7, 37);
    layer_norm<double>(2, 7, 37);
    layer_norm<float>(3, 1, 1024);
    deep_tree<float>();
    deep_tree<double>();
    multi_head_attention<float>(2, 7, 5);
    multi_head_attention<double>(2, 7, 5);
    multi_head_attention<float>(1, 1, 9);
  } catch (const std::exception& error) {
    fail("fused tests", std::string("threw: ") + error.what());
  }
  return finish();
}
