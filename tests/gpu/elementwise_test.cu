// The generated elementwise kernel against host loops: every unary and binary operation,
// scalar operands, comparisons, select, cast, constants, coordinates (iota), dropout's mask,
// derivatives, broadcast, permute, split, merge, rename and slice, alone and nested, in float,
// double, int and bool; sizes odd or 1; bfloat16 and float16 storage computed in float and
// rounded once.
#include "gpu_test.cuh"

#include <string>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;
using attn::tensor;
using attn::tensor_view;

using batch = attn::dim<"batch">;
using heads = attn::dim<"heads">;
using len = attn::dim<"len">;
using src = attn::dim<"src">;
using feat = attn::dim<"feat">;
using dk = attn::dim<"d_k">;
using spare = attn::dim<"spare">;
using model = attn::dim<"d_model", 12>;
using h3 = attn::dim<"h", 3>;
using k4 = attn::dim<"k", 4>;

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, attn::bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, attn::float16>) return "float16";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else return "bool";
}

// ---------------------------------------------------------------------------------------
template <class T>
void unary_operations() {
  const std::string t = "/" + type_name<T>();
  using S = shape<batch, len, feat>;
  const extents<S> sizes(3, 7, 5);
  const auto hx = random_host<T>(sizes, -2.0, 2.0);
  const auto hp = random_host<T>(sizes, 0.1, 3.0);  // log, sqrt, rsqrt
  const auto x = upload(hx);
  const auto p = upload(hp);

  check("negate" + t, -x, [&](auto i) { return -at(hx, i); });
  check("exp" + t, attn::exp(x), [&](auto i) { return std::exp(at(hx, i)); });
  check("log" + t, attn::log(p), [&](auto i) { return std::log(at(hp, i)); });
  check("sqrt" + t, attn::sqrt(p), [&](auto i) { return std::sqrt(at(hp, i)); });
  check("rsqrt" + t, attn::rsqrt(p), [&](auto i) { return 1.0 / std::sqrt(at(hp, i)); });
  check("tanh" + t, attn::tanh(x), [&](auto i) { return std::tanh(at(hx, i)); });
  check("abs" + t, attn::abs(x), [&](auto i) { return std::abs(at(hx, i)); });
  check("relu" + t, attn::relu(x), [&](auto i) { return std::max(at(hx, i), 0.0); });
  check("exp(log(p))" + t, attn::exp(attn::log(p)), [&](auto i) { return at(hp, i); });
}

// ---------------------------------------------------------------------------------------
template <class T>
void binary_operations() {
  const std::string t = "/" + type_name<T>();
  using S = shape<batch, len, feat>;
  const extents<S> sizes(2, 9, 3);
  const auto hx = random_host<T>(sizes, -2.0, 2.0);
  auto hy = random_host<T>(sizes, -2.0, 2.0);
  // Some equal elements, so that == and <= have both answers to give.
  for (index_t i = 0; i < hy.size(); i += 3) hy.data()[i] = hx.data()[i];
  const auto hd = random_host<T>(sizes, 0.5, 1.5);  // divisors
  const auto x = upload(hx);
  const auto y = upload(hy);
  const auto d = upload(hd);

  check("add" + t, x + y, [&](auto i) { return at(hx, i) + at(hy, i); });
  check("subtract" + t, x - y, [&](auto i) { return at(hx, i) - at(hy, i); });
  check("multiply" + t, x * y, [&](auto i) { return at(hx, i) * at(hy, i); });
  check("divide" + t, x / d, [&](auto i) { return at(hx, i) / at(hd, i); });
  check("maximum" + t, attn::max(x, y), [&](auto i) { return std::max(at(hx, i), at(hy, i)); });
  check("minimum" + t, attn::min(x, y), [&](auto i) { return std::min(at(hx, i), at(hy, i)); });

  // A scalar on either side takes the tensor's value type.
  check("add scalar" + t, x + 2.5, [&](auto i) { return at(hx, i) + 2.5; });
  check("scalar subtract" + t, 2.5 - x, [&](auto i) { return 2.5 - at(hx, i); });
  check("multiply scalar" + t, x * 3, [&](auto i) { return at(hx, i) * 3.0; });
  check("scalar divide" + t, 1.0 / d, [&](auto i) { return 1.0 / at(hd, i); });
  check("divide scalar" + t, x / 4.0, [&](auto i) { return at(hx, i) / 4.0; });
  check("maximum scalar" + t, attn::max(x, 0.25), [&](auto i) { return std::max(at(hx, i), 0.25); });
  check("scalar minimum" + t, attn::min(-0.5, x), [&](auto i) { return std::min(-0.5, at(hx, i)); });

  // Comparisons give bool; compared on the stored values, so exactly.
  check("less" + t, x < y, [&](auto i) { return at(hx, i) < at(hy, i); });
  check("less_equal" + t, x <= y, [&](auto i) { return at(hx, i) <= at(hy, i); });
  check("greater" + t, x > y, [&](auto i) { return at(hx, i) > at(hy, i); });
  check("greater_equal" + t, x >= y, [&](auto i) { return at(hx, i) >= at(hy, i); });
  check("equal_to" + t, x == y, [&](auto i) { return at(hx, i) == at(hy, i); });
  check("not_equal_to" + t, x != y, [&](auto i) { return at(hx, i) != at(hy, i); });
  check("greater than scalar" + t, x > 0.0, [&](auto i) { return at(hx, i) > static_cast<double>(T(0)); });
  check("scalar less_equal" + t, 0.0 <= x, [&](auto i) { return static_cast<double>(T(0)) <= at(hx, i); });

  // A longer chain, one kernel.
  check("(x + y) * x - y / d" + t, (x + y) * x - y / d, [&](auto i) {
    return (at(hx, i) + at(hy, i)) * at(hx, i) - at(hy, i) / at(hd, i);
  });
}

// ---------------------------------------------------------------------------------------
template <class T>
void select_cast_constant() {
  const std::string t = "/" + type_name<T>();
  using S = shape<batch, len, feat>;
  const extents<S> sizes(3, 5, 7);
  const auto hx = random_host<T>(sizes, -2.0, 2.0);
  const auto hy = random_host<T>(sizes, -2.0, 2.0);
  const auto hm = random_host<bool>(sizes);
  const auto x = upload(hx);
  const auto y = upload(hy);
  const auto m = upload(hm);

  check("where(x > y, x, y)" + t, attn::where(x > y, x, y),
        [&](auto i) { return std::max(at(hx, i), at(hy, i)); });
  check("where(mask, x, y)" + t, attn::where(m, x, y),
        [&](auto i) { return at(hm, i) != 0 ? at(hx, i) : at(hy, i); });
  check("where(mask, x, scalar)" + t, attn::where(m, x, -1.5),
        [&](auto i) { return at(hm, i) != 0 ? at(hx, i) : -1.5; });
  check("where(mask, scalar, x)" + t, attn::where(m, 0.75, x),
        [&](auto i) { return at(hm, i) != 0 ? 0.75 : at(hx, i); });
  check("where(mask, scalar, scalar)" + t, attn::where(m, T(1), T(-2)),
        [&](auto i) { return at(hm, i) != 0 ? 1.0 : -2.0; });
  // Only the chosen branch runs: the log of a negative number is never taken.
  check("where(x > 0, log(x), 0)" + t, attn::where(x > 0.0, attn::log(attn::abs(x)), 0.0),
        [&](auto i) { return at(hx, i) > 0 ? std::log(std::abs(at(hx, i))) : 0.0; });

  check("cast bool to " + type_name<T>(), attn::cast<T>(x < y),
        [&](auto i) { return at(hx, i) < at(hy, i) ? 1.0 : 0.0; });
  check("cast mask to " + type_name<T>(), attn::cast<T>(m), [&](auto i) { return at(hm, i); });
  check("cast to double" + t, attn::cast<double>(x), [&](auto i) { return at(hx, i); });
  check("cast to int (truncates)" + t, attn::cast<int>(x * 10),
        [&](auto i) { return static_cast<double>(static_cast<int>(static_cast<T>(at(hx, i)) * T(10))); });
  check("cast to bool" + t, attn::cast<bool>(attn::relu(x)),
        [&](auto i) { return at(hx, i) > 0 ? 1.0 : 0.0; });

  check("fill" + t, attn::fill<T, device>(sizes, T(3.25)), [&](auto) { return 3.25; });
  check("constant_like" + t, attn::constant_like(x, -7), [&](auto) { return -7.0; });
}

// ---------------------------------------------------------------------------------------
void integer_and_bool_operations() {
  using S = shape<batch, feat>;
  const extents<S> sizes(5, 13);
  const auto ha = random_host<int>(sizes, -50, 50);
  const auto hb = random_host<int>(sizes, 1, 9);
  const auto hm = random_host<bool>(sizes);
  const auto a = upload(ha);
  const auto b = upload(hb);
  const auto m = upload(hm);

  check("add/int", a + b, [&](auto i) { return at(ha, i) + at(hb, i); });
  check("divide/int (truncates)", a / b, [&](auto i) {
    return static_cast<double>(static_cast<int>(at(ha, i)) / static_cast<int>(at(hb, i)));
  });
  check("multiply scalar/int", a * 3, [&](auto i) { return 3 * at(ha, i); });
  check("negate/int", -a, [&](auto i) { return -at(ha, i); });
  check("abs/int", attn::abs(a), [&](auto i) { return std::abs(at(ha, i)); });
  check("relu/int", attn::relu(a), [&](auto i) { return std::max(at(ha, i), 0.0); });
  check("maximum/int", attn::max(a, b), [&](auto i) { return std::max(at(ha, i), at(hb, i)); });
  check("less/int", a < b, [&](auto i) { return at(ha, i) < at(hb, i); });
  check("where/int", attn::where(m, a, b), [&](auto i) { return at(hm, i) != 0 ? at(ha, i) : at(hb, i); });
  check("cast int to float", attn::cast<float>(a), [&](auto i) { return at(ha, i); });
  check("equal_to/bool", m == (a > 0), [&](auto i) { return (at(hm, i) != 0) == (at(ha, i) > 0); });
  check("where/bool", attn::where(m, a > 0, b > 4),
        [&](auto i) { return at(hm, i) != 0 ? at(ha, i) > 0 : at(hb, i) > 4; });
}

// ---------------------------------------------------------------------------------------
template <class T>
void broadcasts() {
  const std::string t = "/" + type_name<T>();
  const index_t B = 3, H = 2, L = 5, S_ = 7;

  const auto hv = random_host<T>(extents<shape<len>>(L));
  const auto v = upload(hv);
  const extents<shape<batch, len, feat>> blf(B, L, 4);
  check("broadcast [len] -> [batch, len, feat]" + t, attn::broadcast(v, blf),
        [&](auto i) { return at(hv, {i[1]}); });

  const auto hmask = random_host<T>(extents<shape<batch, src>>(B, S_));
  const auto mask = upload(hmask);
  const extents<shape<batch, heads, len, src>> scores(B, H, L, S_);
  check("broadcast [batch, src] -> [batch, heads, len, src]" + t, attn::broadcast(mask, scores),
        [&](auto i) { return at(hmask, {i[0], i[3]}); });

  const auto hrow = random_host<T>(extents<shape<heads, src>>(H, S_));
  const auto row = upload(hrow);
  check("broadcast [heads, src] -> [batch, heads, len, src]" + t, attn::broadcast(row, scores),
        [&](auto i) { return at(hrow, {i[1], i[3]}); });

  attn::tensor<T, shape<>, attn::cpu> hscalar{attn::extents<shape<>>{}};
  hscalar.data()[0] = T(1.5);
  const auto scalar = upload(hscalar);
  check("broadcast [] -> [batch, len]" + t,
        attn::broadcast(scalar, extents<shape<batch, len>>(B, L)), [&](auto) { return 1.5; });

  // Size-1 dimensions on either side.
  const extents<shape<batch, heads, len, src>> thin(B, 1, 1, S_);
  check("broadcast with size-1 dims" + t, attn::broadcast(mask, thin),
        [&](auto i) { return at(hmask, {i[0], i[3]}); });
  const auto hone = random_host<T>(extents<shape<batch, src>>(1, 1));
  const auto one_element = upload(hone);
  check("broadcast [1, 1] -> [1, heads, len, 1]" + t,
        attn::broadcast(one_element, extents<shape<batch, heads, len, src>>(1, H, L, 1)),
        [&](auto) { return at(hone, {0, 0}); });

  check("broadcast to the same shape" + t, attn::broadcast(mask, mask.extents()),
        [&](auto i) { return at(hmask, i); });

  const auto hx = random_host<T>(scores);
  const auto x = upload(hx);
  check("x + broadcast(exp(mask))" + t, x + attn::broadcast_like(attn::exp(mask), x),
        [&](auto i) { return at(hx, i) + std::exp(at(hmask, {i[0], i[3]})); });
  check("broadcast of a broadcast" + t,
        attn::broadcast(attn::broadcast(v, extents<shape<len, src>>(L, S_)), scores),
        [&](auto i) { return at(hv, {i[2]}); });
}

// ---------------------------------------------------------------------------------------
/// Coordinates as values (expr/iota.hpp): alone, shifted, broadcast and combined as ALiBi does.
template <class T>
void coordinates() {
  const std::string t = "/" + type_name<T>();
  check("iota" + t, attn::iota<T, len, device>(37), [&](auto i) { return double(i[0]); });
  check("iota from 5" + t, attn::iota<T, len, device>(9, T(5)), [&](auto i) { return double(i[0] + 5); });
  check("iota of one" + t, attn::iota<T, len, device>(1, T(3)), [&](auto) { return 3.0; });
  const extents<shape<batch, heads, len, src>> scores(2, 3, 5, 7);
  const auto hx = random_host<T>(scores);
  const auto x = upload(hx);
  check("index_along<len> - index_along<src>" + t, attn::index_along<len>(x) - attn::index_along<src>(x),
        [&](auto i) { return double(i[2] - i[3]); });
  const auto hslopes = random_host<T>(extents<shape<heads>>(3));
  const auto slopes = upload(hslopes);
  check("x - slope(head) * |i + 4 - j|" + t,
        x - attn::broadcast_like(slopes, x) * attn::abs(attn::index_along<len>(x, T(4)) - attn::index_along<src>(x)),
        [&](auto i) { return at(hx, i) - at(hslopes, {i[1]}) * std::abs(double(i[2] + 4 - i[3])); });
  check("where(|i - j| <= 2, x, -1)" + t,
        attn::where(attn::abs(attn::index_along<len>(x) - attn::index_along<src>(x)) <= T(2), x, -1.0),
        [&](auto i) { return std::abs(i[2] - i[3]) <= 2 ? at(hx, i) : -1.0; });

  // Derivatives read off expressions (expr/derivative.hpp) lower like any expression.
  const auto alibi = [&](const auto& s, const auto& m) {
    return s - attn::broadcast_like(m, s) * attn::abs(attn::index_along<len>(s, T(4)) - attn::index_along<src>(s));
  };
  check("d(alibi)/d(slope)" + t, attn::derivative<1>(alibi(attn::input<0>(x), attn::input<1>(slopes))),
        [&](auto i) { return -std::abs(double(i[2] + 4 - i[3])); });
  check("d(exp(x) * tanh(x))/dx" + t, attn::derivative<0>(attn::exp(attn::input<0>(x)) * attn::tanh(attn::input<0>(x))),
        [&](auto i) {
          const double v = at(hx, i);
          return std::exp(v) * std::tanh(v) + std::exp(v) * (1 - std::tanh(v) * std::tanh(v));
        });
}
// ---------------------------------------------------------------------------------------
/// Dropout's mask (expr/dropout_mask.hpp): the stream's number at each element's own row-major
/// index, alone, as the product grad::dropout makes (in float over 16-bit storage, rounded once),
/// read through a permute (at the permute's index, not its own), and over 4 194 305 elements
/// (the kernel's whole rounds, in every type); p 0 keeps everything.
template <class T>
void dropout_masks() {
  const std::string t = "/" + type_name<T>();
  using C = attn::accumulate_t<T>;
  using S = shape<batch, len, feat>;
  const attn::random_stream numbers(17);
  const std::uint64_t first = 12345;
  const auto kept = [&](index_t offset, double p) { return numbers.uniform(first + std::uint64_t(offset)) >= p; };
  const double scale = double(C(1.0 / 0.7));
  const extents<S> sizes(3, 7, 33);
  const auto offset = [&](auto i) { return (i[0] * 7 + i[1]) * 33 + i[2]; };
  const auto mask = attn::dropout_mask<C, device>(sizes, 0.3, numbers, first);
  check("dropout_mask" + t, attn::cast<T>(mask), [&](auto i) { return kept(offset(i), 0.3) ? double(T(scale)) : 0.0; },
        0.0);
  const auto hx = random_host<T>(sizes, -2.0, 2.0);
  const auto x = upload(hx);
  check("x * dropout_mask" + t, attn::cast<T>(attn::cast<C>(x) * mask),
        [&](auto i) { return kept(offset(i), 0.3) ? double(T(C(at(hx, i)) * C(scale))) : 0.0; }, 0.0);
  check("permute of dropout_mask" + t, attn::cast<T>(attn::permute<feat, batch, len>(mask)),
        [&](auto i) { return kept((i[1] * 7 + i[2]) * 33 + i[0], 0.3) ? double(T(scale)) : 0.0; }, 0.0);
  const extents<shape<len>> many(4'194'305);  // whole rounds on a GPU of up to 600 multiprocessors
  check("dropout_mask, 4 194 305 elements" + t,
        attn::cast<T>(attn::dropout_mask<C, device>(many, 0.3, numbers, first)),
        [&](auto i) { return kept(i[0], 0.3) ? double(T(scale)) : 0.0; }, 0.0);
  check("dropout_mask, p 0" + t, attn::cast<T>(attn::dropout_mask<C, device>(sizes, 0.0, numbers, first)),
        [&](auto) { return 1.0; }, 0.0);
}

// ---------------------------------------------------------------------------------------
template <class T>
void permutes() {
  const std::string t = "/" + type_name<T>();
  const extents<shape<batch, len, heads, dk>> blhd(2, 5, 3, 4);
  const auto hx = random_host<T>(blhd);
  const auto x = upload(hx);

  check("permute [b,l,h,d] -> [b,h,l,d]" + t, attn::permute<batch, heads, len, dk>(x),
        [&](auto i) { return at(hx, {i[0], i[2], i[1], i[3]}); });
  check("permute reversed" + t, attn::permute<dk, heads, len, batch>(x),
        [&](auto i) { return at(hx, {i[3], i[2], i[1], i[0]}); });
  check("permute identity" + t, attn::permute<batch, len, heads, dk>(x),
        [&](auto i) { return at(hx, i); });
  check("permute of permute" + t,
        attn::permute<len, batch, dk, heads>(attn::permute<batch, heads, len, dk>(x)),
        [&](auto i) { return at(hx, {i[1], i[0], i[3], i[2]}); });

  const auto hm = random_host<T>(extents<shape<len, feat>>(33, 65));
  const auto m = upload(hm);
  check("transpose 33 x 65" + t, attn::permute<feat, len>(m),
        [&](auto i) { return at(hm, {i[1], i[0]}); });

  const auto hs = random_host<T>(extents<shape<batch, len, heads, dk>>(1, 7, 1, 3));
  const auto s = upload(hs);
  check("permute with size-1 dims" + t, attn::permute<heads, dk, batch, len>(s),
        [&](auto i) { return at(hs, {i[2], i[3], i[0], i[1]}); });
  check("exp(permute) * permute" + t,
        attn::exp(attn::permute<batch, heads, len, dk>(x)) * attn::permute<batch, heads, len, dk>(x),
        [&](auto i) {
          const double v = at(hx, {i[0], i[2], i[1], i[3]});
          return std::exp(v) * v;
        });
}

// ---------------------------------------------------------------------------------------
template <class T>
void reshapes() {
  const std::string t = "/" + type_name<T>();
  const auto hx = random_host<T>(extents<shape<batch, len, model>>(2, 5));
  const auto x = upload(hx);

  check("split d_model=12 -> h=3 x k=4" + t, attn::split<model, h3, k4>(x),
        [&](auto i) { return at(hx, {i[0], i[1], i[2] * 4 + i[3]}); });
  const auto hy = random_host<T>(extents<shape<batch, len, h3, k4>>(2, 5));
  const auto y = upload(hy);
  check("merge h=3 x k=4 -> d_model" + t, attn::merge<h3, k4, model>(y),
        [&](auto i) { return at(hy, {i[0], i[1], i[2] / 4, i[2] % 4}); });

  const auto hf = random_host<T>(extents<shape<batch, feat>>(3, 15));
  const auto f = upload(hf);
  check("split dynamic feat=15 -> heads=5 x d_k" + t, attn::split<feat, heads, dk>(f, 5),
        [&](auto i) { return at(hf, {i[0], i[1] * 3 + i[2]}); });
  check("rename len -> src" + t, attn::rename<len, src>(x), [&](auto i) { return at(hx, i); });

  // Multi-head attention's round trip: split, heads forward, back, merge.
  const auto heads_first = attn::permute<batch, h3, len, k4>(attn::split<model, h3, k4>(x));
  check("permute(split(x))" + t, heads_first,
        [&](auto i) { return at(hx, {i[0], i[2], i[1] * 4 + i[3]}); });
  check("merge(permute(permute(split(x)))) == x" + t,
        attn::merge<h3, k4, model>(attn::permute<batch, len, h3, k4>(heads_first)),
        [&](auto i) { return at(hx, i); });
  check("split(x) * 2 then merge" + t, attn::merge<h3, k4, model>(attn::split<model, h3, k4>(x) * 2),
        [&](auto i) { return 2 * at(hx, i); });
}

// ---------------------------------------------------------------------------------------
template <class T>
void slices() {
  const std::string t = "/" + type_name<T>();
  const extents<shape<batch, len, feat>> sizes(4, 9, 5);
  const auto hx = random_host<T>(sizes);
  const auto x = upload(hx);

  check("slice middle dim [2, 5)" + t, attn::slice<len>(x, 2, 3),
        [&](auto i) { return at(hx, {i[0], i[1] + 2, i[2]}); });
  check("slice first dim [1, 2)" + t, attn::slice<batch>(x, 1, 1),
        [&](auto i) { return at(hx, {i[0] + 1, i[1], i[2]}); });
  check("slice last dim [1, 4)" + t, attn::slice<feat>(x, 1, 3),
        [&](auto i) { return at(hx, {i[0], i[1], i[2] + 1}); });
  check("slice whole" + t, attn::slice<len>(x, 0, 9), [&](auto i) { return at(hx, i); });
  check("slice last position" + t, attn::slice<len>(x, 8, 1),
        [&](auto i) { return at(hx, {i[0], 8, i[2]}); });
  check("slice empty" + t, attn::slice<len>(x, 4, 0), [&](auto) { return 0.0; });
  check("slice of slice" + t, attn::slice<len>(attn::slice<len>(x, 1, 6), 2, 3),
        [&](auto i) { return at(hx, {i[0], i[1] + 3, i[2]}); });
  check("slice of permute" + t, attn::slice<len>(attn::permute<feat, len, batch>(x), 3, 4),
        [&](auto i) { return at(hx, {i[2], i[1] + 3, i[0]}); });
  check("permute of slice" + t, attn::permute<feat, len, batch>(attn::slice<len>(x, 3, 4)),
        [&](auto i) { return at(hx, {i[2], i[1] + 3, i[0]}); });
  check("slice of two dims, times x" + t,
        attn::slice<feat>(attn::slice<batch>(x, 2, 2), 0, 2) *
            attn::slice<feat>(attn::slice<batch>(x, 1, 2), 3, 2),
        [&](auto i) { return at(hx, {i[0] + 2, i[1], i[2]}) * at(hx, {i[0] + 1, i[1], i[2] + 3}); });

  // A decoder step: the last position of every sequence, repeated over heads.
  check("broadcast of a slice" + t,
        attn::broadcast(attn::slice<len>(x, 8, 1), extents<shape<batch, heads, len, feat>>(4, 3, 1, 5)) + 1,
        [&](auto i) { return at(hx, {i[0], 8, i[3]}) + 1; });
}

// ---------------------------------------------------------------------------------------
/// 16-bit storage (bfloat16, float16): every node computes in float and the result is rounded
/// once, where it is stored; compare_rounded holds each element to half a unit in the last
/// place of the double reference on the same 16-bit inputs, which a kernel that rounded every
/// node's value would miss. Scalars, iota's positions, reductions and products nested in a
/// tree stay in float; a cast to a 16-bit type rounds where it stands.
template <class T>
void sixteen_bit() {
  const std::string t = "/" + type_name<T>();
  using S = shape<batch, len, feat>;
  const extents<S> sizes(3, 7, 29);
  const auto hx = random_host<T>(sizes, -2.0, 2.0);
  const auto hy = random_host<T>(sizes, -2.0, 2.0);
  const auto hp = random_host<T>(sizes, 0.1, 3.0);
  const auto hm = random_host<bool>(sizes);
  const auto x = upload(hx);
  const auto y = upload(hy);
  const auto p = upload(hp);
  const auto m = upload(hm);

  check("copy" + t, x.view(), [&](auto i) { return at(hx, i); }, 0);
  check("exp" + t, attn::exp(x), [&](auto i) { return std::exp(at(hx, i)); });
  check("tanh(x) * rsqrt(p)" + t, attn::tanh(x) * attn::rsqrt(p),
        [&](auto i) { return std::tanh(at(hx, i)) / std::sqrt(at(hp, i)); });
  check("(x + y) * x - y / p" + t, (x + y) * x - y / p, [&](auto i) {
    return (at(hx, i) + at(hy, i)) * at(hx, i) - at(hy, i) / at(hp, i);
  });
  // 1/(1 − 0.1) is not a 16-bit number: the scalar stays a float.
  check("x * 1.1111111 (a float scalar)" + t, x * (1.0 / 0.9), [&](auto i) { return at(hx, i) * (1.0f / 0.9f); });
  check("where(mask, exp(x), -0.3)" + t, attn::where(m, attn::exp(x), -0.3),
        [&](auto i) { return at(hm, i) != 0 ? std::exp(at(hx, i)) : double(-0.3f); });
  check("relu(x) > y" + t, attn::relu(x) > y, [&](auto i) { return std::max(at(hx, i), 0.0) > at(hy, i); });
  check("cast to float" + t, attn::cast<float>(x) * 3, [&](auto i) { return at(hx, i) * 3; }, 1e-7);
  check("cast float to 16 bits" + t, attn::cast<T>(attn::cast<float>(x) / 7.0f),
        [&](auto i) { return at(hx, i) / 7; });
  // A cast to 16 bits inside a tree rounds there: (x / 7 rounded) · 7 is not x.
  check("cast to 16 bits inside a float tree" + t, attn::cast<float>(attn::cast<T>(attn::cast<float>(x) / 7.0f)) * 7.0f,
        [&](auto i) { return double(float(T(float(at(hx, i)) / 7.0f))) * 7; }, 1e-7);
  check("fill" + t, attn::fill<T, device>(sizes, T(0.1f)), [&](auto) { return double(float(T(0.1f))); }, 0);
  // Positions past 256 are not bfloat16 numbers; iota counts in float.
  check("index_along<feat>(x, 300) + 0.5" + t, attn::index_along<feat>(x, 300) + 0.5,
        [&](auto i) { return double(i[2] + 300) + 0.5; });
  const auto hv = random_host<T>(extents<shape<feat>>(29));
  const auto v = upload(hv);
  check("x - broadcast(v)" + t, x - attn::broadcast_like(v, x), [&](auto i) { return at(hx, i) - at(hv, {i[2]}); });
  check("permute(x) * 2" + t, attn::permute<feat, batch, len>(x) * 2,
        [&](auto i) { return 2 * at(hx, {i[1], i[2], i[0]}); });
  check("slice(x) + 1" + t, attn::slice<feat>(x, 3, 20) + 1, [&](auto i) { return at(hx, {i[0], i[1], i[2] + 3}) + 1; });
  // A reduction inside a tree is kept in float: x − mean(x) rounds once.
  check("x - mean<feat>(x)" + t, x - attn::broadcast_like(attn::mean<feat>(x), x), [&](auto i) {
    double total = 0;
    for (index_t f = 0; f < 29; ++f) total += at(hx, {i[0], i[1], f});
    return at(hx, i) - total / 29;
  });
  check("sum<feat>(x * y)" + t, attn::sum<feat>(x * y), [&](auto i) {
    double total = 0;
    for (index_t f = 0; f < 29; ++f) total += at(hx, {i[0], i[1], f}) * at(hy, {i[0], i[1], f});
    return total;
  });
  check("max<len>(x)" + t, attn::max<len>(x), [&](auto i) {
    double best = -1e300;
    for (index_t l = 0; l < 7; ++l) best = std::max(best, at(hx, {i[0], l, i[1]}));
    return best;
  }, 0);
}

// ---------------------------------------------------------------------------------------
// More elements than one pass of the grid: the grid-stride loop, and the 64-bit index path.
template <class T>
void large_and_wide() {
  const std::string t = "/" + type_name<T>();
  const extents<shape<batch, len>> sizes(7, 142'861);  // 1'000'027 elements
  const auto hx = random_host<T>(sizes);
  const auto hv = random_host<T>(extents<shape<len>>(142'861));
  const auto x = upload(hx);
  const auto v = upload(hv);
  check("x * 2 + 1, 1M elements" + t, x * 2 + 1, [&](auto i) { return at(hx, i) * 2 + 1; });
  check("x - broadcast(v), 1M elements" + t, x - attn::broadcast_like(v, x),
        [&](auto i) { return at(hx, i) - at(hv, {i[1]}); });
  check("permute, 1M elements" + t, attn::permute<len, batch>(x),
        [&](auto i) { return at(hx, {i[1], i[0]}); });

#if !defined(ATTN_GPU_TEST_HOST)
  // The 64-bit path only runs above 2^31 elements; force it on a small composite.
  const auto hy = random_host<T>(extents<shape<batch, len, feat>>(3, 11, 6));
  const auto y = upload(hy);
  guard_exceptions("64-bit indices" + t, [&] {
    const auto e = attn::permute<feat, batch, len>(attn::slice<len>(y, 2, 7)) * 2;
    guarded<T, shape<feat, batch, len>> out(e.extents());
    attn::cuda_backend::detail::evaluate_elementwise_with<index_t>(out.view(), e);
    settle("64-bit indices");
    compare_guarded("64-bit indices: permute(slice) * 2" + t, out,
                    reference(e.extents(), [&](auto i) { return 2 * at(hy, {i[1], i[2] + 2, i[0]}); }));
  });
#endif
}

// ---------------------------------------------------------------------------------------
/// The kernel that takes a run of 16 bytes a thread (elementwise_vectors.cuh), into outputs
/// aligned for it: the heads' split and another permute at d_k 64, a bias row and a value a row
/// broadcast, aligned and unaligned slices, a 16-bit result of float operands. Each against the
/// reference with the runs on and again with them off (elementwise_vectors()); on the GPU, the
/// plan asserted to be one the vector kernel takes (`runs`) or leaves.
template <class E, class F>
void check_runs(const std::string& name, const E& e, F&& f, [[maybe_unused]] bool runs) {
  using T = typename E::value_type;
  using S = typename E::shape_type;
  try {
    guarded<T, S> out(e.extents(), aligned_pad);
#if !defined(ATTN_GPU_TEST_HOST)
    {
      attn::cuda_backend::workspace ws;
      const auto plan = attn::cuda_backend::make_plan(e, ws);
      expect(attn::cuda_backend::runs_in_vectors(plan, out.view().data(), out.view().size()) == runs, name,
             runs ? "the vector kernel should take this tree" : "the vector kernel should leave this tree");
    }
#endif
    out.view() = e;
    settle(name);
    compare_guarded(name, out, reference(e.extents(), f), default_tolerance<T>);
  } catch (const std::exception& error) {
    fail(name, std::string("threw: ") + error.what());
  }
}

template <class T>
void vector_runs() {
  const std::string t = "/" + type_name<T>();
  const extents<shape<batch, len, heads, dk>> blhd(3, 7, 4, 64);
  const auto hx = random_host<T>(blhd);
  const auto hbias = random_host<T>(extents<shape<dk>>(64));
  const auto hrow = random_host<T>(extents<shape<batch, len, heads>>(3, 7, 4));
  const auto hw = random_host<T>(extents<shape<batch, len, feat>>(4, 9, 40));
  const auto hf = random_host<float>(blhd);
  const auto x = upload(hx);
  const auto bias = upload(hbias);
  const auto row = upload(hrow);
  const auto w = upload(hw);
  const auto xf = upload(hf);
  for (const bool on : {true, false}) {
#if !defined(ATTN_GPU_TEST_HOST)
    attn::cuda_backend::elementwise_vectors() = on;
#endif
    const std::string how = (on ? ", in runs" : ", a thread an element") + t;
    check_runs("split heads [b,l,h,d] -> [b,h,l,d]" + how, attn::permute<batch, heads, len, dk>(x),
               [&](auto i) { return at(hx, {i[0], i[2], i[1], i[3]}); }, true);
    check_runs("permute [b,l,h,d] -> [l,b,h,d] * 2" + how, attn::permute<len, batch, heads, dk>(x) * 2,
               [&](auto i) { return 2 * at(hx, {i[1], i[0], i[2], i[3]}); }, true);
    check_runs("x + bias" + how, x + attn::broadcast_like(bias, x),
               [&](auto i) { return at(hx, i) + at(hbias, {i[3]}); }, true);
    check_runs("x * a value a row" + how, x * attn::broadcast_like(row, x),
               [&](auto i) { return at(hx, i) * at(hrow, {i[0], i[1], i[2]}); }, true);
    check_runs("relu(x) - x, in place of neither" + how, attn::relu(x) - x,
               [&](auto i) { return std::max(at(hx, i), 0.0) - at(hx, i); }, true);
    check_runs("w[:, :, 8:24] * 2" + how, attn::slice<feat>(w, 8, 16) * 2,
               [&](auto i) { return 2 * at(hw, {i[0], i[1], i[2] + 8}); }, true);
    check_runs("w[:, :, 3:19] * 2" + how, attn::slice<feat>(w, 3, 16) * 2,
               [&](auto i) { return 2 * at(hw, {i[0], i[1], i[2] + 3}); }, false);
    check_runs("transpose [b,l,h,d] -> [b,l,d,h]" + how, attn::permute<batch, len, dk, heads>(x),
               [&](auto i) { return at(hx, {i[0], i[1], i[3], i[2]}); }, false);
    if constexpr (attn::is_float16_storage<T>)
      check_runs("cast<16-bit>(float x * 3)" + how, attn::cast<T>(xf * 3.0f),
                 [&](auto i) { return double(float(T(float(at(hf, i) * 3.0)))); }, true);
  }
#if !defined(ATTN_GPU_TEST_HOST)
  attn::cuda_backend::elementwise_vectors() = true;
#endif
}

// ---------------------------------------------------------------------------------------
// Assignment: into new tensors, in place, and with the destination read elsewhere.
template <class T>
void assignment_and_aliasing() {
  const std::string t = "/" + type_name<T>();
  const extents<shape<batch, len>> sizes(3, 11);
  const auto hx = random_host<T>(sizes);
  const auto x = upload(hx);

  guard_exceptions("tensor(expression)" + t, [&] {
    const attn::tensor<T, shape<batch, len>, device> y(attn::exp(x) + 1);
    compare("tensor(expression)" + t, download(y),
            reference(sizes, [&](auto i) { return std::exp(at(hx, i)) + 1; }), default_tolerance<T>);
  });
  guard_exceptions("eval(expression)" + t, [&] {
    const auto y = attn::eval(x * x);
    compare("eval(expression)" + t, download(y),
            reference(sizes, [&](auto i) { return at(hx, i) * at(hx, i); }), default_tolerance<T>);
  });
  guard_exceptions("copy of a view" + t, [&] {
    guarded<T, shape<batch, len>> out(sizes);
    out.view() = x.view();
    settle("copy of a view");
    compare_guarded("copy of a view" + t, out, reference(sizes, [&](auto i) { return at(hx, i); }));
  });
  guard_exceptions("tensor copy constructor" + t, [&] {
    const attn::tensor<T, shape<batch, len>, device> y(x);
    compare("tensor copy constructor" + t, download(y),
            reference(sizes, [&](auto i) { return at(hx, i); }), default_tolerance<T>);
  });

  guard_exceptions("in place x = x * 2 + 1" + t, [&] {
    auto y = upload(hx);
    y = y * 2 + 1;
    compare("in place x = x * 2 + 1" + t, download(y),
            reference(sizes, [&](auto i) { return at(hx, i) * 2 + 1; }), default_tolerance<T>);
  });
  // Large enough for whole rounds of the kernel (elementwise_kernel.cuh) on any GPU of up to 600
  // multiprocessors: each thread stores 4 elements after loading them, in place.
  guard_exceptions("in place x = x * 2 + 1, 4 198 400 elements" + t, [&] {
    const extents<shape<batch, len>> large(4096, 1025);
    const auto hl = random_host<T>(large);
    auto y = upload(hl);
    y = y * 2 + 1;
    compare("in place x = x * 2 + 1, 4 198 400 elements" + t, download(y),
            reference(large, [&](auto i) { return at(hl, i) * 2 + 1; }), default_tolerance<T>);
  });

  // A square transposed in place: every element reads another that is also written.
  guard_exceptions("in place transpose" + t, [&] {
    const auto hm = random_host<T>(extents<shape<len, src>>(9, 9));
    auto m = upload(hm);
    m = attn::permute<len, src>(attn::rename<spare, len>(attn::rename<len, src>(attn::rename<src, spare>(m))));
    compare("in place transpose" + t, download(m),
            reference(hm.extents(), [&](auto i) { return at(hm, {i[1], i[0]}); }), default_tolerance<T>);
  });

  // Overlapping views one element apart, both ways, plain copies and through an operation.
  guard_exceptions("shifted overlap" + t, [&] {
    const index_t n = 1000;
    const auto hbuf = random_host<T>(extents<shape<len>>(n + 1));
    for (int direction = 0; direction < 2; ++direction) {
      for (int through_op = 0; through_op < 2; ++through_op) {
        auto buf = upload(hbuf);
        const tensor_view<T, shape<len>, device> low(buf.data(), extents<shape<len>>(n));
        const tensor_view<T, shape<len>, device> high(buf.data() + 1, extents<shape<len>>(n));
        const auto& dst = direction == 0 ? low : high;
        const auto& from = direction == 0 ? high : low;
        if (through_op != 0) dst = from * 1;
        else dst = from;
        const auto all = download(buf);
        const std::string name = std::string("shifted overlap, ") +
                                 (direction == 0 ? "x[i] = x[i+1]" : "x[i+1] = x[i]") +
                                 (through_op != 0 ? " * 1" : "") + t;
        compare(name, all, reference(all.extents(), [&](auto i) {
                  const index_t k = i[0];
                  if (direction == 0) return k < n ? at(hbuf, {k + 1}) : at(hbuf, {k});
                  return k > 0 ? at(hbuf, {k - 1}) : at(hbuf, {k});
                }),
                default_tolerance<T>);
      }
    }
  });

  guard_exceptions("extent mismatch throws", [&] {
    guarded<T, shape<batch, len>> out(extents<shape<batch, len>>(3, 12));
    bool threw = false;
    try {
      out.view() = x + 1;
    } catch (const attn::extent_error&) {
      threw = true;
    }
    bool intact = false;
    (void)out.fetch(intact);
    expect(threw && intact, "extent mismatch throws, writes nothing" + t);
  });
}

}  // namespace

int main() {
  if (const int skip = skip_without_device(); skip != 0) return skip;
  try {
    unary_operations<float>();
    unary_operations<double>();
    binary_operations<float>();
    binary_operations<double>();
    select_cast_constant<float>();
    select_cast_constant<double>();
    integer_and_bool_operations();
    broadcasts<float>();
    broadcasts<double>();
    coordinates<float>();
    coordinates<double>();
    check("iota/int", attn::iota<int, len, device>(11, -3), [&](auto i) { return double(i[0] - 3); });
    dropout_masks<float>();
    dropout_masks<double>();
    dropout_masks<attn::bfloat16>();
    dropout_masks<attn::float16>();
    permutes<float>();
    permutes<double>();
    reshapes<float>();
    reshapes<double>();
    slices<float>();
    slices<double>();
    large_and_wide<float>();
    large_and_wide<double>();
    assignment_and_aliasing<float>();
    assignment_and_aliasing<double>();
    sixteen_bit<attn::bfloat16>();
    sixteen_bit<attn::float16>();
    vector_runs<float>();
    vector_runs<double>();
    vector_runs<attn::bfloat16>();
    vector_runs<attn::float16>();
  } catch (const std::exception& error) {
    fail("elementwise tests", std::string("threw: ") + error.what());
  }
  return finish();
}
