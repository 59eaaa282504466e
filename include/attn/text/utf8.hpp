// Strict UTF-8 validation: where the first byte sequence that is not well-formed UTF-8 starts.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace attn::text {

/// Byte offset of the first ill-formed sequence in `bytes`, or nullopt when all of it is
/// well-formed UTF-8 in the sense of the Unicode Standard, Table 3-7: overlong forms,
/// surrogates (U+D800..U+DFFF), code points above U+10FFFF, stray continuation bytes and
/// sequences cut short by the end of the text are all rejected. The offset is that of the
/// sequence's first byte.
constexpr std::optional<std::size_t> first_invalid_utf8(std::string_view bytes) noexcept {
  const std::size_t size = bytes.size();
  std::size_t i = 0;
  while (i < size) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The allowed range of the second byte depends on the lead byte: that is how Table 3-7
    // excludes overlongs (E0, F0), surrogates (ED) and values past U+10FFFF (F4).
    std::size_t length = 0;
    unsigned char second_low = 0x80, second_high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) second_low = 0xA0;
      if (lead == 0xED) second_high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) second_low = 0x90;
      if (lead == 0xF4) second_high = 0x8F;
    } else {
      return i;  // a continuation byte, an overlong lead (C0, C1) or a lead past F4
    }
    if (size - i < length) return i;
    const auto second = static_cast<unsigned char>(bytes[i + 1]);
    if (second < second_low || second > second_high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      if (next < 0x80 || next > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

}  // namespace attn::text
