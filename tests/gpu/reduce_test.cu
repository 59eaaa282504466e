// Reductions against host loops: sum, max and mean over the first, a middle and the last
// dimension; short rows (a warp each), long rows (a block each), strided columns, walked whole
// and cut into chunks; operands that are views and operands that are expressions; size-1 and
// empty reduced dimensions.
#include "gpu_test.cuh"

#include <string>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;

using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using feat = attn::dim<"feat">;
using row = attn::dim<"row">;
using heads = attn::dim<"heads">;
using dk = attn::dim<"d_k">;

template <class T>
std::string type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

enum class kind { sum, max, mean };

/// The reference of one reduction over positions [0, n) of f(j).
template <class F>
double reduce_reference(kind k, index_t n, F&& f) {
  double acc = k == kind::max ? -std::numeric_limits<double>::infinity() : 0.0;
  for (index_t j = 0; j < n; ++j) acc = k == kind::max ? std::max(acc, f(j)) : acc + f(j);
  return k == kind::mean ? acc / static_cast<double>(n) : acc;
}

/// sum, max and mean over each dimension of [batch, len, feat] with the given sizes.
template <class T>
void over_each_dimension(index_t B, index_t L, index_t F, double lo, double hi) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " [" + std::to_string(B) + "," + std::to_string(L) + "," + std::to_string(F) + "]";
  const auto hx = random_host<T>(extents<shape<batch, len, feat>>(B, L, F), lo, hi);
  const auto x = upload(hx);

  check("sum over batch" + size + t, attn::sum<batch>(x), [&](auto i) {
    return reduce_reference(kind::sum, B, [&](index_t j) { return at(hx, {j, i[0], i[1]}); });
  });
  check("sum over len" + size + t, attn::sum<len>(x), [&](auto i) {
    return reduce_reference(kind::sum, L, [&](index_t j) { return at(hx, {i[0], j, i[1]}); });
  });
  check("sum over feat" + size + t, attn::sum<feat>(x), [&](auto i) {
    return reduce_reference(kind::sum, F, [&](index_t j) { return at(hx, {i[0], i[1], j}); });
  });
  check("max over batch" + size + t, attn::max<batch>(x), [&](auto i) {
    return reduce_reference(kind::max, B, [&](index_t j) { return at(hx, {j, i[0], i[1]}); });
  });
  check("max over len" + size + t, attn::max<len>(x), [&](auto i) {
    return reduce_reference(kind::max, L, [&](index_t j) { return at(hx, {i[0], j, i[1]}); });
  });
  check("max over feat" + size + t, attn::max<feat>(x), [&](auto i) {
    return reduce_reference(kind::max, F, [&](index_t j) { return at(hx, {i[0], i[1], j}); });
  });
  check("mean over batch" + size + t, attn::mean<batch>(x), [&](auto i) {
    return reduce_reference(kind::mean, B, [&](index_t j) { return at(hx, {j, i[0], i[1]}); });
  });
  check("mean over len" + size + t, attn::mean<len>(x), [&](auto i) {
    return reduce_reference(kind::mean, L, [&](index_t j) { return at(hx, {i[0], j, i[1]}); });
  });
  check("mean over feat" + size + t, attn::mean<feat>(x), [&](auto i) {
    return reduce_reference(kind::mean, F, [&](index_t j) { return at(hx, {i[0], i[1], j}); });
  });
}

/// Contiguous rows of every length class: below a warp, around it, the warp/block switch at
/// 1024, and long rows; few and many of them.
template <class T>
void rows(index_t R, index_t N) {
  const std::string t = "/" + type_name<T>();
  const std::string size = " [" + std::to_string(R) + "," + std::to_string(N) + "]";
  // Positive values: a float sum of thousands of terms stays within tolerance of the double one.
  const auto hx = random_host<T>(extents<shape<row, feat>>(R, N), 0.5, 1.5);
  const auto hs = random_host<T>(extents<shape<row, feat>>(R, N), -3.0, 3.0);
  const auto x = upload(hx);
  const auto s = upload(hs);
  check("row sum" + size + t, attn::sum<feat>(x), [&](auto i) {
    return reduce_reference(kind::sum, N, [&](index_t j) { return at(hx, {i[0], j}); });
  });
  check("row max" + size + t, attn::max<feat>(s), [&](auto i) {
    return reduce_reference(kind::max, N, [&](index_t j) { return at(hs, {i[0], j}); });
  });
  check("row mean" + size + t, attn::mean<feat>(x), [&](auto i) {
    return reduce_reference(kind::mean, N, [&](index_t j) { return at(hx, {i[0], j}); });
  });
}

/// Operands that are expressions, evaluated into a temporary first.
template <class T>
void expression_operands() {
  const std::string t = "/" + type_name<T>();
  const index_t B = 3, L = 37, F = 19;
  const auto hx = random_host<T>(extents<shape<batch, len, feat>>(B, L, F));
  const auto x = upload(hx);

  check("sum over feat of exp(x)" + t, attn::sum<feat>(attn::exp(x)), [&](auto i) {
    return reduce_reference(kind::sum, F, [&](index_t j) { return std::exp(at(hx, {i[0], i[1], j})); });
  });
  check("max over len of permute(x)" + t, attn::max<len>(attn::permute<feat, len, batch>(x)),
        [&](auto i) {
          return reduce_reference(kind::max, L, [&](index_t j) { return at(hx, {i[1], j, i[0]}); });
        });
  check("mean over feat of a slice" + t, attn::mean<feat>(attn::slice<feat>(x, 3, 11)), [&](auto i) {
    return reduce_reference(kind::mean, 11, [&](index_t j) { return at(hx, {i[0], i[1], j + 3}); });
  });
  check("sum of a sum" + t, attn::sum<batch>(attn::sum<feat>(x)), [&](auto i) {
    double acc = 0;
    for (index_t b = 0; b < B; ++b)
      for (index_t f = 0; f < F; ++f) acc += at(hx, {b, i[0], f});
    return acc;
  });
  check("sum of a slice of a sum" + t, attn::sum<len>(attn::slice<batch>(attn::sum<feat>(x), 1, 1) * 1), [&](auto i) {
    double acc = 0;
    for (index_t l = 0; l < L; ++l)
      for (index_t f = 0; f < F; ++f) acc += at(hx, {1, l, f});
    (void)i;
    return acc;
  });
  // A split of a view is the view's data under another shape: reduced in place.
  const auto hy = random_host<T>(extents<shape<batch, feat>>(B, 12));
  const auto y = upload(hy);
  check("sum over a split of a view" + t, attn::sum<dk>(attn::split<feat, heads, dk>(y, 3)), [&](auto i) {
    return reduce_reference(kind::sum, 4, [&](index_t d) { return at(hy, {i[0], i[1] * 4 + d}); });
  });
  const auto hv = random_host<T>(extents<shape<len>>(L));
  const auto v = upload(hv);
  check("sum of a vector to []" + t, attn::sum<len>(v), [&](auto) {
    return reduce_reference(kind::sum, L, [&](index_t j) { return at(hv, {j}); });
  });
  check("reduction inside an elementwise tree" + t, attn::sum<feat>(x) * 2 + attn::max<feat>(x), [&](auto i) {
    return 2 * reduce_reference(kind::sum, F, [&](index_t j) { return at(hx, {i[0], i[1], j}); }) +
           reduce_reference(kind::max, F, [&](index_t j) { return at(hx, {i[0], i[1], j}); });
  });
}

/// An empty reduced dimension gives each operation's identity.
template <class T>
void empty_reductions() {
  const std::string t = "/" + type_name<T>();
  const auto x = upload(random_host<T>(extents<shape<batch, feat>>(4, 0)));
  check("sum over an empty dim is 0" + t, attn::sum<feat>(x), [&](auto) { return 0.0; });
  check("max over an empty dim is -inf" + t, attn::max<feat>(x),
        [&](auto) { return -std::numeric_limits<double>::infinity(); });
  const auto y = upload(random_host<T>(extents<shape<batch, feat>>(0, 5)));
  check("reduction to an empty result" + t, attn::sum<feat>(y), [&](auto) { return 0.0; });
}

/// The destination is the operand's own memory: evaluated aside, then copied.
template <class T>
void aliasing() {
  const std::string t = "/" + type_name<T>();
  guard_exceptions("reduction into its own operand" + t, [&] {
    const index_t R = 5, N = 40;
    const auto hx = random_host<T>(extents<shape<row, feat>>(R, N));
    auto x = upload(hx);
    // R elements of x's second row, as the [row] result: written before that row is read,
    // unless the result goes elsewhere first.
    const attn::tensor_view<T, shape<row>, device> inside(x.data() + N, extents<shape<row>>(R));
    inside = attn::sum<feat>(x);
    const auto all = download(x);
    compare("reduction into its own operand" + t, all, reference(all.extents(), [&](auto i) {
              if (i[0] == 1 && i[1] < R)
                return reduce_reference(kind::sum, N, [&](index_t j) { return at(hx, {i[1], j}); });
              return at(hx, i);
            }),
            default_tolerance<T>);
  });
}

}  // namespace

int main() {
  if (const int skip = skip_without_device(); skip != 0) return skip;
  try {
    // Odd sizes and size-1 dimensions in every position.
    over_each_dimension<float>(3, 7, 5, -1, 1);
    over_each_dimension<double>(3, 7, 5, -1, 1);
    over_each_dimension<float>(1, 13, 1, -1, 1);
    over_each_dimension<double>(5, 1, 33, -1, 1);
    over_each_dimension<float>(2, 300, 3, 0.5, 1.5);
    over_each_dimension<double>(2, 3, 2049, -1, 1);
    // Columns cut into chunks (reduce_kernels.cuh): a bias's gradient over a batch's positions.
    over_each_dimension<float>(1, 25'000, 512, 0.5, 1.5);
    over_each_dimension<double>(3, 257, 40, -1, 1);
    for (const index_t n : {1, 2, 31, 32, 33, 100, 1023, 1024, 1025, 4099}) {
      rows<float>(17, n);
      rows<double>(17, n);
    }
    rows<float>(10'007, 33);     // many rows: the grid-stride loop over warps
    rows<float>(1'100, 3'001);   // many long rows: the grid-stride loop over blocks
    rows<double>(3, 100'003);
    expression_operands<float>();
    expression_operands<double>();
    empty_reductions<float>();
    empty_reductions<double>();
    aliasing<float>();
    aliasing<double>();
  } catch (const std::exception& error) {
    fail("reduce tests", std::string("threw: ") + error.what());
  }
  return finish();
}
