// UTF-8: decoding one character at a time, and strict validation (where the first byte sequence
// that is not well-formed UTF-8 starts).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace attn::text {

/// One character of UTF-8 text: its code point and how many bytes it takes.
struct utf8_char {
  char32_t code_point;
  std::size_t length;
  bool well_formed;
};

/// The character that starts at byte `offset` (< text.size()), well-formed in the sense of the
/// Unicode Standard, Table 3-7: overlong forms, surrogates (U+D800..U+DFFF), code points above
/// U+10FFFF, stray continuation bytes and sequences cut short by the end of the text are not.
/// A byte that does not start a well-formed sequence is a character of its own, with code
/// point U+DC00 + byte as Python's "surrogateescape" decoding gives it, so that text measured
/// by characters (BLEU, chrF) is measured as Python measures it.
constexpr utf8_char utf8_char_at(std::string_view text, std::size_t offset) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[offset + k]); };
  const unsigned char lead = byte(0);
  const utf8_char malformed{0xDC00u + lead, 1, false};
  if (lead < 0x80) return {lead, 1, true};
  // The allowed range of the second byte depends on the lead byte: that is how Table 3-7
  // excludes overlongs (E0, F0), surrogates (ED) and values past U+10FFFF (F4).
  std::size_t length = 0;
  unsigned char second_low = 0x80, second_high = 0xBF;
  char32_t code_point = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0Fu;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07u;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return malformed;  // a continuation byte, an overlong lead (C0, C1) or a lead past F4
  }
  if (text.size() - offset < length) return malformed;
  if (byte(1) < second_low || byte(1) > second_high) return malformed;
  for (std::size_t k = 1; k < length; ++k) {
    if (byte(k) < 0x80 || byte(k) > 0xBF) return malformed;
    code_point = (code_point << 6) | (byte(k) & 0x3Fu);
  }
  return {code_point, length, true};
}

/// Byte offset of the first ill-formed sequence in `bytes` (see utf8_char_at), or nullopt when
/// all of it is well-formed UTF-8. The offset is that of the sequence's first byte.
constexpr std::optional<std::size_t> first_invalid_utf8(std::string_view bytes) noexcept {
  for (std::size_t i = 0; i < bytes.size();) {
    const utf8_char next = utf8_char_at(bytes, i);
    if (!next.well_formed) return i;
    i += next.length;
  }
  return std::nullopt;
}

}  // namespace attn::text
