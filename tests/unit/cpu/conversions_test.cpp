// Tests of include/attn/cpu/conversions.hpp: every 16-bit number widened, and floats of every
// binade rounded, give the bits of bfloat16's and float16's own conversions (core/float16.hpp) at
// every vector width this CPU runs; arrays split across threads; and the assignments that take
// this road (a view cast to the other width) against the element-by-element conversion.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include <attn/cpu/conversions.hpp>

#include "../reference.hpp"

namespace {
namespace conv = attn::cpu_backend::conversions;
namespace vm = attn::cpu_backend::vector_math;
using attn::index_t;

std::vector<vm::isa> supported_sets() {
  std::vector<vm::isa> sets;
  for (const auto set : {vm::isa::baseline, vm::isa::avx2, vm::isa::avx512})
    if (vm::supports(set)) sets.push_back(set);
  return sets;
}

/// The float bits a 16-bit type drops at this float exponent: bfloat16 16; float16 13 where its
/// numbers are normal, one more for each binade down into its subnormals (their step is 2⁻²⁴),
/// and 24 from 2⁻²⁵ down, where the one tie is 2⁻²⁵ itself.
int dropped_bits(bool bfloat, std::uint32_t exponent) {
  if (bfloat) return 16;
  return exponent >= 113 ? 13 : int(std::min<std::uint32_t>(126 - std::min(exponent, 126u), 24u));
}

/// Floats of every binade, both signs: round numbers; at each rounding boundary of both 16-bit
/// types, for this binade's dropped bits, the tie with the kept bits even and odd and one bit
/// either side of each; the subnormal and overflow ranges of float16; infinities and NaNs with
/// payloads; and a sweep of every 4099th bit pattern.
std::vector<float> test_floats() {
  std::vector<std::uint32_t> bits;
  const auto both_signs = [&](std::uint32_t b) {
    bits.push_back(b);
    bits.push_back(0x80000000u | b);
  };
  for (std::uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (const std::uint32_t fraction : {0x0u, 0x1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x2000u, 0x3000u, 0x7FFFu,
                                         0x8000u, 0x8001u, 0xFFFFu, 0x10000u, 0x18000u, 0x400000u, 0x7FFFFFu})
      both_signs((exponent << 23) | fraction);
    for (const bool bfloat : {true, false}) {
      const int dropped = dropped_bits(bfloat, exponent);
      const std::uint32_t base = exponent << 23;
      if (dropped >= 24) {  // the binade's power of two and its neighbours
        for (const std::uint32_t b : {base, base + 1, base - 1}) both_signs(b);
        continue;
      }
      const std::uint32_t tie = 1u << (dropped - 1), odd = 1u << dropped;
      for (const std::uint32_t kept : {0u, odd})
        for (const std::uint32_t b : {tie - 1, tie, tie + 1}) both_signs(base | kept | b);
    }
  }
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 4099) bits.push_back(std::uint32_t(b));
  std::vector<float> floats;
  for (const auto b : bits) floats.push_back(std::bit_cast<float>(b));
  return floats;
}
}  // namespace

TEST_CASE_TEMPLATE("16-bit conversions over arrays: the bits of the scalar conversions at every vector width", T,
                   attn::bfloat16, attn::float16) {
  std::vector<T> every(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) every[b] = T::from_bits(std::uint16_t(b));
  const std::vector<float> floats = test_floats();
  for (const auto set : supported_sets()) {
    CAPTURE(int(set));
    std::vector<float> wide(every.size());
    conv::widen(wide.data(), every.data(), index_t(every.size()), set);
    index_t widened_wrong = 0;
    for (std::size_t i = 0; i < every.size(); ++i)
      widened_wrong += std::bit_cast<std::uint32_t>(wide[i]) != std::bit_cast<std::uint32_t>(float(every[i]));
    CHECK(widened_wrong == 0);

    std::vector<T> narrow(floats.size());
    conv::narrow(narrow.data(), floats.data(), index_t(floats.size()), set);
    index_t rounded_wrong = 0;
    for (std::size_t i = 0; i < floats.size(); ++i) rounded_wrong += narrow[i].bits != T(floats[i]).bits;
    CHECK(rounded_wrong == 0);
  }
}

TEST_CASE_TEMPLATE("16-bit conversions over arrays: every length's tail, and nothing past the end", T, attn::bfloat16,
                   attn::float16) {
  // Every length below 70 (two steps of the widest loop, 32 numbers, and its tail) at every
  // width, and one over the threads' pieces (2¹⁵ a thread and more).
  std::vector<index_t> lengths(70);
  for (index_t n = 0; n < 70; ++n) lengths[std::size_t(n)] = n;
  lengths.push_back(100003);
  for (const auto set : supported_sets()) {
    for (const index_t n : lengths) {
      CAPTURE(int(set));
      CAPTURE(n);
      std::vector<float> in(std::size_t(n) + 1);
      for (index_t i = 0; i < n; ++i) in[std::size_t(i)] = float(i % 977) * 0.0371f - 17.0f;
      std::vector<T> narrow(std::size_t(n) + 1, T::from_bits(0x1234));
      conv::narrow(narrow.data(), in.data(), n, set);
      std::vector<float> wide(std::size_t(n) + 1, -3.0f);
      conv::widen(wide.data(), narrow.data(), n, set);
      index_t wrong = 0;
      for (index_t i = 0; i < n; ++i) {
        wrong += narrow[std::size_t(i)].bits != T(in[std::size_t(i)]).bits;
        wrong += wide[std::size_t(i)] != float(narrow[std::size_t(i)]);
      }
      CHECK(wrong == 0);
      CHECK(narrow.back().bits == 0x1234);  // the sentinels past the end are untouched
      CHECK(wide.back() == -3.0f);
    }
  }
}

TEST_CASE_TEMPLATE("assigning a view to a tensor of the other width converts each element once", T, attn::bfloat16,
                   attn::float16) {
  using rows = attn::dim<"rows">;
  using cols = attn::dim<"cols">;
  using S = attn::shape<rows, cols>;
  const attn::extents<S> sizes(301, 129);
  attn::tensor<float, S> floats(sizes);
  attn::test::fill_random(floats, -70000.0, 70000.0);  // past float16's largest finite too
  floats.data()[5] = 1e-6f;                             // a float16 subnormal

  // The road taken: conversions.hpp's, not Eigen's element by element.
  using attn::cpu_backend::detail::plain_conversion;
  static_assert(plain_conversion<T, S, attn::tensor_view<float, S, attn::cpu>>::matches);
  static_assert(plain_conversion<T, S, decltype(attn::cast<T>(floats.view()))>::matches);
  static_assert(plain_conversion<float, S, attn::tensor_view<T, S, attn::cpu>>::matches);
  static_assert(!plain_conversion<float, S, attn::tensor_view<float, S, attn::cpu>>::matches);

  // (A float view assigned to a 16-bit tensor without the cast is refused by assign; the CPU's
  // products store their float results so, tested in expr/contract_test.cpp.)
  attn::tensor<T, S> rounded(sizes);
  rounded = attn::cast<T>(floats.view());
  attn::tensor<float, S> widened(sizes);
  widened = attn::cast<float>(rounded.view());
  index_t wrong = 0;
  for (index_t i = 0; i < floats.size(); ++i) {
    const T want = T(floats.data()[i]);
    wrong += rounded.data()[i].bits != want.bits;
    wrong += std::bit_cast<std::uint32_t>(widened.data()[i]) != std::bit_cast<std::uint32_t>(float(want));
  }
  CHECK(wrong == 0);

  // A copy at the same width is a copy of the bits (a memmove), and a tensor assigned its own
  // view keeps them.
  static_assert(plain_conversion<T, S, attn::tensor_view<T, S, attn::cpu>>::matches);
  attn::tensor<T, S> copied(sizes);
  copied = rounded.view();
  rounded = rounded.view();
  index_t copied_wrong = 0;
  for (index_t i = 0; i < floats.size(); ++i) {
    const T want = T(floats.data()[i]);
    copied_wrong += copied.data()[i].bits != want.bits;
    copied_wrong += rounded.data()[i].bits != want.bits;
  }
  CHECK(copied_wrong == 0);
}
