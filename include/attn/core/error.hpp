// The run-time error for dynamic extents that disagree: it names the dimension and both sizes.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "config.hpp"

namespace attn {

/// Thrown when two operands carry the same dynamic dimension with different sizes, or when a
/// size given at run time contradicts a static extent or an index range.
class extent_error : public std::invalid_argument {
 public:
  extent_error(std::string_view operation, std::string_view dimension, index_t expected,
               index_t actual)
      : std::invalid_argument(std::string(operation) + ": dimension '" + std::string(dimension) +
                              "' has extent " + std::to_string(expected) + " in one operand and " +
                              std::to_string(actual) + " in the other"),
        dimension_(dimension),
        expected_(expected),
        actual_(actual) {}

  extent_error(std::string_view operation, std::string_view dimension, std::string_view what)
      : std::invalid_argument(std::string(operation) + ": dimension '" + std::string(dimension) +
                              "' " + std::string(what)),
        dimension_(dimension) {}

  std::string_view dimension() const noexcept { return dimension_; }
  index_t expected() const noexcept { return expected_; }
  index_t actual() const noexcept { return actual_; }

 private:
  std::string_view dimension_;  // names live in the dimension types: static storage
  index_t expected_ = 0;
  index_t actual_ = 0;
};

}  // namespace attn
