// Checks of numbers given on the command line, for CLI11's ->check(). CLI11's own Range,
// PositiveNumber and NonNegativeNumber let "nan" through (every comparison with NaN is false), and
// an open upper bound shows in their messages as a 309-digit number; an unsigned option takes
// "-1" as 2^64 - 1.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace attn::examples {

namespace detail {
inline std::string number_text(double x) {  // the shortest text that reads back as x: a bound can be typed
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, x).ptr);
}
}  // namespace detail

/// A finite number from `low` (or above it, when `low_excluded`) to `high`; with no `high`, no
/// upper bound. The message says what was expected and what came.
inline CLI::Validator finite_number(double low, bool low_excluded = false,
                                    double high = std::numeric_limits<double>::infinity()) {
  const std::string from = detail::number_text(low), to = detail::number_text(high);
  const std::string expected = low_excluded ? "a number above " + from + (std::isfinite(high) ? ", at most " + to : "")
                               : std::isfinite(high) ? "a number from " + from + " to " + to
                                                     : "a number, " + from + " or more";
  return CLI::Validator(
      [=](std::string& text) {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        const bool whole = !text.empty() && end == text.c_str() + text.size();
        if (!whole || !std::isfinite(x) || x < low || (low_excluded && x == low) || x > high)
          return "expected " + expected + ", got '" + text + "'";
        return std::string();
      },
      expected, "finite number");
}

/// A whole number from 0 to 2^64 - 1, digits alone: "-1" and "1e3" are refused, not wrapped.
inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) {
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || error != std::errc() || end != text.data() + text.size())
          return "expected a whole number from 0 to " + std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                 ", got '" + text + "'";
        text = std::to_string(value);  // what CLI11 converts next, in base 10 (it would read "010" as octal)
        return std::string();
      },
      "0 to 2^64-1", "unsigned 64-bit");
}

}  // namespace attn::examples
