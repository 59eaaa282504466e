// Helpers for unit tests: random contents, plain-loop indexing and error norms.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include <attn/attn.hpp>

namespace attn::test {

/// The random generator of one test case: fixed seed, so failures repeat.
inline std::mt19937& rng() {
  static std::mt19937 engine(20261122);
  return engine;
}

/// A random extent from a set that includes 1 and odd sizes.
inline index_t random_extent() {
  static constexpr index_t sizes[] = {1, 2, 3, 5, 7, 8, 13, 17};
  return sizes[std::uniform_int_distribution<int>(0, 7)(rng())];
}

template <class T, class S, class D>
void fill_random(tensor<T, S, D>& t, double low = -1.0, double high = 1.0) {
  std::uniform_real_distribution<double> dist(low, high);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(dist(rng()));
}

/// Calls f(index) for every multi-index of the extents, in row-major order.
template <class S, class F>
void for_each_index(const extents<S>& sizes, F&& f) {
  std::array<index_t, S::rank> index{};
  if (sizes.size() == 0) return;
  for (index_t flat = 0; flat < sizes.size(); ++flat) {
    f(index);
    for (std::size_t d = S::rank; d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

/// Row-major offset of a multi-index.
template <class S>
index_t offset_of(const extents<S>& sizes, const std::array<index_t, S::rank>& index) {
  index_t flat = 0;
  for (std::size_t d = 0; d < S::rank; ++d) flat = flat * sizes[d] + index[d];
  return flat;
}

/// Element of a tensor at a multi-index.
template <class T, class S, class D>
T at(const tensor<T, S, D>& t, const std::array<index_t, S::rank>& index) {
  return t.data()[offset_of(t.extents(), index)];
}

/// ‖out − ref‖ / ‖ref‖ (‖out − ref‖ when ref is zero); NaN anywhere gives infinity.
template <class T>
double relative_error(const T* out, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = static_cast<double>(out[i]);
    if (std::isnan(o) != std::isnan(ref[i])) return INFINITY;
    if (std::isnan(o)) continue;
    diff += (o - ref[i]) * (o - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// A unit in the last place of 16-bit type T at x (bfloat16: 8 significant bits and float's
/// exponents; float16: 11 bits, subnormals below 2⁻¹⁴).
template <class T>
double ulp_of(double x) {
  constexpr int bits = std::is_same_v<T, bfloat16> ? 8 : 11;
  constexpr int min_exponent = std::is_same_v<T, bfloat16> ? -126 : -14;
  const int exponent = x == 0 ? min_exponent : std::max(min_exponent, std::ilogb(x));
  return std::ldexp(1.0, exponent - (bits - 1));
}

/// The largest error of 16-bit outputs, in units in the last place of the references, after
/// `slack` (the float arithmetic before the one rounding) is taken off; infinity for a NaN.
/// A result rounded once from float is within half a unit.
template <class T>
double ulps_off(const T* out, const std::vector<double>& ref, double slack) {
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = static_cast<double>(out[i]);
    if (std::isnan(o)) return INFINITY;
    worst = std::max(worst, (std::abs(o - ref[i]) - slack) / ulp_of<T>(ref[i]));
  }
  return worst;
}

/// The reference computed by f(index) for every element of shape S, as doubles in row-major order.
template <class S, class F>
std::vector<double> reference(const extents<S>& sizes, F&& f) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(sizes.size()));
  for_each_index(sizes, [&](const auto& index) { out.push_back(static_cast<double>(f(index))); });
  return out;
}

}  // namespace attn::test
