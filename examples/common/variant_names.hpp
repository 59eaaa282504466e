// The names of the attention variants the programs are compiled with (variants.hpp), without
// the library's headers: for --help and for checking --attention before any data is read.
#pragma once

#include <string>
#include <string_view>

namespace attn::examples {

/// For --help and for checking --attention before data is read.
inline constexpr std::string_view variant_help =
    "scaled (the paper's, eq. 1), unscaled, additive (Bahdanau), restricted:R (self-attention to the R "
    "nearest positions, Table 1), alibi or alibi:learned (linear biases; use with --positions none)";
inline constexpr std::string_view variant_names[] = {"scaled", "unscaled", "additive", "restricted", "alibi"};


/// Empty when `spec` (NAME[:ARG]) names a compiled variant, else why not.
inline std::string unknown_variant(std::string_view spec) {
  const auto name = spec.substr(0, spec.find(':'));
  for (auto known : variant_names)
    if (name == known) return "";
  return "unknown attention variant '" + std::string(name) + "'; known: " + std::string(variant_help);
}

}  // namespace attn::examples
