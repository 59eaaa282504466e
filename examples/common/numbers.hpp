// Whole numbers read from text that people or other programs wrote (metadata, environment).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace attn::examples {

/// The int that `text` spells, all of it; nothing for anything else ("12x", "", out of range).
inline std::optional<int> whole_number(const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return value;
}

}  // namespace attn::examples
