// The scalar functions of elementwise nodes. Each backend maps them to its own vector form;
// the scalar call operators serve CUDA kernels and plain-loop references.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "../core/config.hpp"

namespace attn::op {

// Unary.
struct negate {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { return -a; }
};
struct exp {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { using std::exp; return exp(a); }
};
struct log {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { using std::log; return log(a); }
};
struct sqrt {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { using std::sqrt; return sqrt(a); }
};
struct rsqrt {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { using std::sqrt; return T(1) / sqrt(a); }
};
struct tanh {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { using std::tanh; return tanh(a); }
};
struct abs {
  // The sign bit cleared where T is a built-in floating type (|−0| = +0, as Eigen's abs gives):
  // nvcc folds that into the next instruction's operand, where a comparison and a select would
  // be two instructions more (ALiBi's −m·|i − j| at every score of a fused kernel's tile).
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) {
      using std::abs;
      return abs(a);
    } else {
      return a < T(0) ? -a : a;
    }
  }
};
struct relu {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a) const { return a > T(0) ? a : T(0); }
};
/// Conversion of the value type (bool masks to float, float to double for checks).
template <class To>
struct cast {
  template <class T>
  ATTN_HOST_DEVICE To operator()(T a) const { return static_cast<To>(a); }
};

// Binary arithmetic.
struct add {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct subtract {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a - b; }
};
struct multiply {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a * b; }
};
struct divide {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a / b; }
};
struct maximum {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a < b ? b : a; }
};
struct minimum {
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return b < a ? b : a; }
};

// Comparisons: their value type is bool.
struct less {
  template <class T>
  ATTN_HOST_DEVICE bool operator()(T a, T b) const { return a < b; }
};
struct less_equal {
  template <class T>
  ATTN_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; }
};
struct greater {
  template <class T>
  ATTN_HOST_DEVICE bool operator()(T a, T b) const { return a > b; }
};
struct greater_equal {
  template <class T>
  ATTN_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; }
};
struct equal_to {
  template <class T>
  ATTN_HOST_DEVICE bool operator()(T a, T b) const { return a == b; }
};
struct not_equal_to {
  template <class T>
  ATTN_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};

// Reductions: identity and combination, for kernels and references.
struct sum {
  template <class T>
  ATTN_HOST_DEVICE static T identity() { return T(0); }
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct max {
  template <class T>
  ATTN_HOST_DEVICE static T identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  template <class T>
  ATTN_HOST_DEVICE T operator()(T a, T b) const { return a < b ? b : a; }
};
/// The sum divided by the reduced extent.
struct mean : sum {};

}  // namespace attn::op
