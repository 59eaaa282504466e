// Contractions (cuBLAS, and attn's kernel for small ones) against host loops: the four transpose layouts with and without batch
// dimensions, attention's Q·Kᵀ and P·V, operands that need a temporary, several free
// dimensions, size-1 and empty contracted dimensions, contractions inside elementwise trees, and
// products with a bias (and ReLU) epilogue; bfloat16 and float16 operands on tensor cores,
// accumulated in float and rounded once (each element within half a unit in the last place).
#include "gpu_test.cuh"

#include <string>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;

using batch = attn::dim<"batch">;
using heads = attn::dim<"heads">;
using len = attn::dim<"len">;
using src = attn::dim<"src">;
using dk = attn::dim<"d_k">;
using dv = attn::dim<"d_v">;
using rows = attn::dim<"rows">;
using cols = attn::dim<"cols">;
using inner = attn::dim<"inner">;
using dk8 = attn::dim<"d_k8", 8>;

/// Which road small products take this round (contract.cuh): attn's kernel or cuBLAS.
std::string road;

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, attn::bfloat16>) return "bfloat16" + road;
  else if constexpr (std::is_same_v<T, attn::float16>) return "float16" + road;
  else return (std::is_same_v<T, float> ? "float" : "double") + road;
}

/// Σ_k f(k) for k in [0, n).
template <class F>
double dot(index_t n, F&& f) {
  double acc = 0;
  for (index_t k = 0; k < n; ++k) acc += f(k);
  return acc;
}

/// C = A·B with A stored as [m, k] or [k, m] and B as [k, n] or [n, k]: the four layouts
/// cuBLAS is called with, operands used in place.
template <class T>
void layouts(index_t M, index_t N, index_t K) {
  const std::string t = "/" + type_name<T>();
  const std::string size =
      " m=" + std::to_string(M) + " n=" + std::to_string(N) + " k=" + std::to_string(K);
  const auto ha = random_host<T>(extents<shape<rows, inner>>(M, K));
  const auto hat = random_host<T>(extents<shape<inner, rows>>(K, M));
  const auto hb = random_host<T>(extents<shape<inner, cols>>(K, N));
  const auto hbt = random_host<T>(extents<shape<cols, inner>>(N, K));
  const auto a = upload(ha);
  const auto at_ = upload(hat);
  const auto b = upload(hb);
  const auto bt = upload(hbt);

  check("A B" + size + t, attn::contract<inner>(a, b),
        [&](auto i) { return dot(K, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, i[1]}); }); });
  check("A Bt" + size + t, attn::contract<inner>(a, bt),
        [&](auto i) { return dot(K, [&](index_t k) { return at(ha, {i[0], k}) * at(hbt, {i[1], k}); }); });
  check("At B" + size + t, attn::contract<inner>(at_, b),
        [&](auto i) { return dot(K, [&](index_t k) { return at(hat, {k, i[0]}) * at(hb, {k, i[1]}); }); });
  check("At Bt" + size + t, attn::contract<inner>(at_, bt),
        [&](auto i) { return dot(K, [&](index_t k) { return at(hat, {k, i[0]}) * at(hbt, {i[1], k}); }); });
  check("matmul" + size + t, attn::matmul(a, b),
        [&](auto i) { return dot(K, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, i[1]}); }); });
}

/// The same four layouts, batched.
template <class T>
void batched_layouts(index_t B, index_t M, index_t N, index_t K) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " batch=" + std::to_string(B) + " m=" + std::to_string(M) +
                           " n=" + std::to_string(N) + " k=" + std::to_string(K);
  const auto ha = random_host<T>(extents<shape<batch, rows, inner>>(B, M, K));
  const auto hat = random_host<T>(extents<shape<batch, inner, rows>>(B, K, M));
  const auto hb = random_host<T>(extents<shape<batch, inner, cols>>(B, K, N));
  const auto hbt = random_host<T>(extents<shape<batch, cols, inner>>(B, N, K));
  const auto a = upload(ha);
  const auto at_ = upload(hat);
  const auto b = upload(hb);
  const auto bt = upload(hbt);

  check("batched A B" + size + t, attn::contract<inner>(a, b), [&](auto i) {
    return dot(K, [&](index_t k) { return at(ha, {i[0], i[1], k}) * at(hb, {i[0], k, i[2]}); });
  });
  check("batched A Bt" + size + t, attn::contract<inner>(a, bt), [&](auto i) {
    return dot(K, [&](index_t k) { return at(ha, {i[0], i[1], k}) * at(hbt, {i[0], i[2], k}); });
  });
  check("batched At B" + size + t, attn::contract<inner>(at_, b), [&](auto i) {
    return dot(K, [&](index_t k) { return at(hat, {i[0], k, i[1]}) * at(hb, {i[0], k, i[2]}); });
  });
  check("batched At Bt" + size + t, attn::contract<inner>(at_, bt), [&](auto i) {
    return dot(K, [&](index_t k) { return at(hat, {i[0], k, i[1]}) * at(hbt, {i[0], i[2], k}); });
  });
}

/// Scaled dot-product attention's two products (§3.2.1): scores = Q·Kᵀ / √d_k, out = P·V.
template <class T>
void attention_products(index_t B, index_t H, index_t L, index_t S, index_t D) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " [" + std::to_string(B) + "," + std::to_string(H) + "," +
                           std::to_string(L) + "," + std::to_string(S) + "," + std::to_string(D) + "]";
  const auto hq = random_host<T>(extents<shape<batch, heads, len, dk>>(B, H, L, D));
  const auto hk = random_host<T>(extents<shape<batch, heads, src, dk>>(B, H, S, D));
  const auto hp = random_host<T>(extents<shape<batch, heads, len, src>>(B, H, L, S), 0.0, 1.0);
  const auto hv = random_host<T>(extents<shape<batch, heads, src, dv>>(B, H, S, D + 1));
  const auto q = upload(hq);
  const auto k = upload(hk);
  const auto p = upload(hp);
  const auto v = upload(hv);

  check("Q Kt" + size + t, attn::contract<dk>(q, k), [&](auto i) {
    return dot(D, [&](index_t d) { return at(hq, {i[0], i[1], i[2], d}) * at(hk, {i[0], i[1], i[3], d}); });
  });
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  check("Q Kt / sqrt(d_k)" + size + t, attn::contract<dk>(q, k) * scale, [&](auto i) {
    return scale * dot(D, [&](index_t d) {
             return at(hq, {i[0], i[1], i[2], d}) * at(hk, {i[0], i[1], i[3], d});
           });
  });
  check("P V" + size + t, attn::contract<src>(p, v), [&](auto i) {
    return dot(S, [&](index_t s) { return at(hp, {i[0], i[1], i[2], s}) * at(hv, {i[0], i[1], s, i[3]}); });
  });
  // Self-attention: keys are the queries under another name (a reshape node: a temporary).
  check("Q Qt (rename)" + size + t, attn::contract<dk>(q, attn::rename<len, src>(q)), [&](auto i) {
    return dot(D, [&](index_t d) { return at(hq, {i[0], i[1], i[2], d}) * at(hq, {i[0], i[1], i[3], d}); });
  });
  // Heads last in K: the batch dimensions are not leading, so K is permuted into a temporary.
  const auto hkp = random_host<T>(extents<shape<batch, src, heads, dk>>(B, S, H, D));
  const auto kp = upload(hkp);
  check("Q Kt, K as [batch, src, heads, d_k]" + size + t, attn::contract<dk>(q, kp), [&](auto i) {
    return dot(D, [&](index_t d) { return at(hq, {i[0], i[1], i[2], d}) * at(hkp, {i[0], i[3], i[1], d}); });
  });
}

/// Operands that are expressions, several free dimensions, a static contracted dimension,
/// outer products, empty sums, and contractions inside elementwise trees.
template <class T>
void other_forms() {
  const std::string t = "/" + type_name<T>();
  const index_t M = 11, N = 6, K = 9, H = 3;
  const auto ha = random_host<T>(extents<shape<rows, inner>>(M, K));
  const auto hb = random_host<T>(extents<shape<inner, cols>>(K, N));
  const auto a = upload(ha);
  const auto b = upload(hb);

  check("exp(A) (2 B)" + t, attn::contract<inner>(attn::exp(a), b * 2), [&](auto i) {
    return dot(K, [&](index_t k) { return std::exp(at(ha, {i[0], k})) * 2 * at(hb, {k, i[1]}); });
  });
  check("permute(A) B" + t, attn::contract<inner>(attn::permute<inner, rows>(a), b), [&](auto i) {
    return dot(K, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, i[1]}); });
  });
  check("slice(A) slice(B)" + t,
        attn::contract<inner>(attn::slice<inner>(a, 2, 5), attn::slice<inner>(b, 4, 5)), [&](auto i) {
          return dot(5, [&](index_t k) { return at(ha, {i[0], k + 2}) * at(hb, {k + 4, i[1]}); });
        });

  const auto h3a = random_host<T>(extents<shape<rows, heads, inner>>(M, H, K));
  const auto h3b = random_host<T>(extents<shape<inner, cols, dv>>(K, N, 2));
  const auto a3 = upload(h3a);
  const auto b3 = upload(h3b);
  check("two free dims each side" + t, attn::contract<inner>(a3, b3), [&](auto i) {
    return dot(K, [&](index_t k) { return at(h3a, {i[0], i[1], k}) * at(h3b, {k, i[2], i[3]}); });
  });

  const auto hs = random_host<T>(extents<shape<len, dk8>>(7));
  const auto hw8 = random_host<T>(extents<shape<dk8, cols>>(N));
  const auto s = upload(hs);
  const auto w = upload(hw8);
  check("static contracted dim (d_k=8)" + t, attn::contract<dk8>(s, w), [&](auto i) {
    return dot(8, [&](index_t k) { return at(hs, {i[0], k}) * at(hw8, {k, i[1]}); });
  });

  // Heads split from a view: a reshape of a view, used in place.
  const auto hx = random_host<T>(extents<shape<batch, len, cols>>(2, 5, 12));
  const auto hw = random_host<T>(extents<shape<inner, dv>>(4, 3));
  const auto xs = upload(hx);
  const auto w4 = upload(hw);
  check("split(x) W" + t, attn::contract<inner>(attn::split<cols, heads, inner>(xs, 3), w4), [&](auto i) {
    return dot(4, [&](index_t k) { return at(hx, {i[0], i[1], i[2] * 4 + k}) * at(hw, {k, i[3]}); });
  });

  const auto hu = random_host<T>(extents<shape<rows, inner>>(M, 1));
  const auto hz = random_host<T>(extents<shape<inner, cols>>(1, N));
  const auto u = upload(hu);
  const auto z = upload(hz);
  check("outer product (k=1)" + t, attn::contract<inner>(u, z),
        [&](auto i) { return at(hu, {i[0], 0}) * at(hz, {0, i[1]}); });

  const auto e0 = upload(random_host<T>(extents<shape<rows, inner>>(M, 0)));
  const auto e1 = upload(random_host<T>(extents<shape<inner, cols>>(0, N)));
  check("empty contracted dim gives zeros" + t, attn::contract<inner>(e0, e1), [&](auto) { return 0.0; });
  const auto e2 = upload(random_host<T>(extents<shape<rows, inner>>(0, K)));
  check("empty result" + t, attn::contract<inner>(e2, b), [&](auto) { return 0.0; });

  const auto hbias = random_host<T>(extents<shape<cols>>(N));
  const auto bias = upload(hbias);
  // A linear layer: x·W + b, then ReLU, in one assignment.
  const auto product = attn::contract<inner>(a, b);
  check("relu(A B + broadcast(bias))" + t, attn::relu(product + attn::broadcast_like(bias, product)),
        [&](auto i) {
          return std::max(0.0, dot(K, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, i[1]}); }) +
                                   at(hbias, {i[1]}));
        });
  const auto hw2 = random_host<T>(extents<shape<cols, src>>(N, 4));
  const auto w2 = upload(hw2);
  check("(A B) W (a product of a product)" + t, attn::contract<cols>(product, w2), [&](auto i) {
    return dot(N, [&](index_t c) {
      return dot(K, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, c}); }) * at(hw2, {c, i[1]});
    });
  });
}

/// The destination is an operand's own memory: evaluated aside, then copied.
template <class T>
void aliasing() {
  const std::string t = "/" + type_name<T>();
  guard_exceptions("product into its own operand" + t, [&] {
    const index_t M = 8;
    const auto ha = random_host<T>(extents<shape<rows, inner>>(M, M));
    const auto hb = random_host<T>(extents<shape<inner, cols>>(M, M));
    auto a = upload(ha);
    const auto b = upload(hb);
    // A ← A·B, the product viewed over A's own elements.
    const attn::tensor_view<T, shape<rows, cols>, device> a_as_result(a.data(), extents<shape<rows, cols>>(M, M));
    a_as_result = attn::contract<inner>(a, b);
    const auto out = download(a);
    compare("product into its own operand" + t, out, reference(out.extents(), [&](auto i) {
              return dot(M, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, i[1]}); });
            }),
            default_tolerance<T>);
  });
  guard_exceptions("product into its own renamed operand" + t, [&] {
    const index_t M = 9;
    const auto ha = random_host<T>(extents<shape<rows, inner>>(M, M));
    const auto hb = random_host<T>(extents<shape<inner, cols>>(M, M));
    auto a = upload(ha);
    const auto b = upload(hb);
    // The operand is a reshape of A (read in place), the result A's memory again.
    const attn::tensor_view<T, shape<len, cols>, device> a_as_result(a.data(), extents<shape<len, cols>>(M, M));
    a_as_result = attn::contract<inner>(attn::rename<rows, len>(a), b);
    const auto out = download(a);
    compare("product into its own renamed operand" + t, out, reference(out.extents(), [&](auto i) {
              return dot(M, [&](index_t k) { return at(ha, {i[0], k}) * at(hb, {k, i[1]}); });
            }),
            default_tolerance<T>);
  });
}

/// A linear layer's x·W + b and relu(x·W + b) (cuBLASLt with a bias epilogue for float and
/// 16 bits, two passes for double): the four layouts, a bias at an odd address, an output at one (the
/// guarded buffer's) and at the pool's alignment, and a [batch, len, in] input.
template <class T>
void affine_epilogues(index_t M, index_t N, index_t K) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " m=" + std::to_string(M) + " n=" + std::to_string(N) + " k=" + std::to_string(K);
  const auto ha = random_host<T>(extents<shape<rows, inner>>(M, K));
  const auto hat = random_host<T>(extents<shape<inner, rows>>(K, M));
  const auto hb = random_host<T>(extents<shape<inner, cols>>(K, N));
  const auto hbt = random_host<T>(extents<shape<cols, inner>>(N, K));
  const auto hbias = random_host<T>(extents<shape<cols>>(N + 1));
  const auto a = upload(ha);
  const auto at_ = upload(hat);
  const auto b = upload(hb);
  const auto bt = upload(hbt);
  const auto bias_storage = upload(hbias);
  const attn::tensor_view<const T, shape<cols>, device> bias(bias_storage.data(), extents<shape<cols>>(N));
  const attn::tensor_view<const T, shape<cols>, device> odd_bias(bias_storage.data() + 1, extents<shape<cols>>(N));
  const extents<shape<rows, cols>> out_sizes(M, N);
  const auto relu = [](double v) { return v > 0 ? v : 0.0; };
  const auto product = [&](auto i, bool a_t, bool b_t) {
    return dot(K, [&](index_t k) {
      return (a_t ? at(hat, {k, i[0]}) : at(ha, {i[0], k})) * (b_t ? at(hbt, {i[1], k}) : at(hb, {k, i[1]}));
    });
  };
  const auto bias_at = [&](index_t c, bool odd) { return double(hbias.data()[c + (odd ? 1 : 0)]); };
  // cuBLASLt's bias epilogue with bfloat16 output rounds the product to bfloat16 before adding
  // the bias (an H100, CUDA 13.0: 3.5 units of a sum that the bias made small; float16 output
  // rounds once): half a unit of the product more. The odd bias goes through attn's own second
  // pass, which rounds once.
  constexpr bool rounded_twice = std::is_same_v<T, attn::bfloat16>;
  const auto epilogue = [&](const std::string& name, const auto& e, auto&& f, auto&& product_alone) {
    if constexpr (rounded_twice) check_rounded_twice(name, e, f, product_alone);
    else check(name, e, f);
  };

  epilogue("A B + bias" + size + t, attn::contract<inner>(a, b) + attn::broadcast(bias, out_sizes),
           [&](auto i) { return product(i, false, false) + bias_at(i[1], false); },
           [&](auto i) { return product(i, false, false); });
  epilogue("relu(A Bt + bias)" + size + t, attn::relu(attn::contract<inner>(a, bt) + attn::broadcast(bias, out_sizes)),
           [&](auto i) { return relu(product(i, false, true) + bias_at(i[1], false)); },
           [&](auto i) { return product(i, false, true); });
  check("relu(At B + odd bias)" + size + t,
        attn::relu(attn::contract<inner>(at_, b) + attn::broadcast(odd_bias, out_sizes)),
        [&](auto i) { return relu(product(i, true, false) + bias_at(i[1], true)); });
  check("At Bt + odd bias" + size + t, attn::contract<inner>(at_, bt) + attn::broadcast(odd_bias, out_sizes),
        [&](auto i) { return product(i, true, true) + bias_at(i[1], true); });

  guard_exceptions("relu(A B + bias) into an aligned tensor" + size + t, [&] {
    attn::tensor<T, shape<rows, cols>, device> out(out_sizes);
    const long long before = attn::cuda_backend::epilogue_products();
    out = attn::relu(attn::contract<inner>(a, b) + attn::broadcast(bias, out_sizes));
    // Float or 16 bits with an aligned bias: cuBLASLt's epilogue, unless it has no algorithm
    // for a tiny shape.
    if (!std::is_same_v<T, double> && M * N >= 64 * 64)
      expect(attn::cuda_backend::epilogue_products() == before + 1, "cuBLASLt epilogue used" + size + t,
             std::to_string(attn::cuda_backend::epilogue_products() - before) + " epilogue products");
    const auto expected =
        reference(out_sizes, [&](auto i) { return relu(product(i, false, false) + bias_at(i[1], false)); });
    const auto product_alone = reference(out_sizes, [&](auto i) { return product(i, false, false); });
    compare("relu(A B + bias) into an aligned tensor" + size + t, download(out), expected, default_tolerance<T>,
            rounded_twice ? &product_alone : nullptr);
  });

  // [batch, len, inner] · [inner, cols]: the model's linear layers, batch and len both free.
  const index_t B = 2;
  if (M % B == 0) {
    const extents<shape<batch, len, inner>> x_sizes(B, M / B, K);
    const attn::tensor_view<const T, shape<batch, len, inner>, device> x(a.data(), x_sizes);
    const auto row = [&](auto i) { return std::array<index_t, 2>{i[0] * (M / B) + i[1], i[2]}; };
    epilogue("relu(X[b,l,k] W + bias)" + size + t,
             attn::relu(attn::contract<inner>(x, b) + attn::broadcast(bias, extents<shape<batch, len, cols>>(B, M / B, N))),
             [&](auto i) { return relu(product(row(i), false, false) + bias_at(i[2], false)); },
             [&](auto i) { return product(row(i), false, false); });
  }
}

/// `--races`: the small products' kernel alone (shared memory within a warp, __syncwarp), on
/// every layout and attention's shapes at a few words, checked as in the full run: for
/// compute-sanitizer's racecheck and synccheck (scripts/gpu.sh, ATTN_GPU_RACECHECK).
void races() {
  batched_layouts<float>(3, 13, 7, 29);
  batched_layouts<attn::bfloat16>(3, 13, 7, 29);
  attention_products<attn::bfloat16>(2, 3, 7, 5, 8);
  attention_products<attn::bfloat16>(4, 8, 10, 12, 64);
}

}  // namespace

int main(int argc, char** argv) {
  if (const int skip = skip_without_device(); skip != 0) return skip;
  if (argc > 1 && std::string(argv[1]) == "--races") {
    try {
      races();
    } catch (const std::exception& error) {
      fail("contract tests --races", std::string("threw: ") + error.what());
    }
    return finish();
  }
  try {
    // Every product twice: small ones (cuda/attn/cuda/small_products.cuh) on attn's kernel, then
    // on cuBLAS; larger ones on cuBLAS both times.
    for (const bool small : {true, false}) {
      attn::cuda_backend::small_products::enabled() = small;
      road = small ? "" : " (cuBLAS)";
      for (const auto& [m, n, k] : {std::array<index_t, 3>{13, 7, 29}, {1, 1, 1}, {1, 17, 5},
                                    {64, 1, 3}, {130, 67, 257}}) {
        layouts<float>(m, n, k);
        layouts<double>(m, n, k);
      }
      batched_layouts<float>(3, 13, 7, 29);
      batched_layouts<double>(3, 13, 7, 29);
      batched_layouts<float>(1, 5, 1, 8);
      batched_layouts<double>(5, 1, 9, 1);
      attention_products<float>(2, 3, 7, 5, 8);
      attention_products<double>(2, 3, 7, 5, 8);
      attention_products<float>(3, 1, 1, 9, 16);  // one query: a decoder step
      attention_products<float>(1, 8, 33, 65, 64);
      other_forms<float>();
      other_forms<double>();
      aliasing<float>();
      aliasing<double>();
      for (const auto& [m, n, k] : {std::array<index_t, 3>{13, 7, 29}, {1, 1, 1}, {64, 1, 3}, {128, 256, 64}}) {
        layouts<attn::bfloat16>(m, n, k);
        layouts<attn::float16>(m, n, k);
      }
      batched_layouts<attn::bfloat16>(3, 13, 7, 29);
      attention_products<attn::bfloat16>(2, 3, 7, 5, 8);
      attention_products<attn::bfloat16>(40, 8, 10, 12, 64);  // a few words, d_k 64: 320 small products
      attention_products<attn::float16>(1, 8, 33, 65, 64);
    }
    attn::cuda_backend::small_products::enabled() = true;
    road.clear();
    for (const auto& [m, n, k] : {std::array<index_t, 3>{13, 7, 29}, {1, 1, 1}, {2, 17, 5}, {128, 256, 64},
                                  {130, 67, 257}}) {
      affine_epilogues<float>(m, n, k);
      affine_epilogues<double>(m, n, k);
    }
    // 16-bit operands (GemmEx, cuBLASLt on tensor cores); k ≤ 64 keeps float's error in the
    // sums under the comparison's slack.
    for (const auto& [m, n, k] : {std::array<index_t, 3>{13, 7, 29}, {1, 1, 1}, {64, 1, 3}, {128, 256, 64}}) {
      affine_epilogues<attn::bfloat16>(m, n, k);
      affine_epilogues<attn::float16>(m, n, k);
    }
  } catch (const std::exception& error) {
    fail("contract tests", std::string("threw: ") + error.what());
  }
  return finish();
}
