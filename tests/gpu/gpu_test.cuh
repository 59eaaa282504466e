// Shared by the GPU tests: SKIP without a device, random inputs, sentinel-guarded outputs and
// checks against plain host loops with a normalised error (ggml's test-backend-ops style).
//
// The expression tests also build as C++ against the CPU backend (g++ -x c++
// -DATTN_GPU_TEST_HOST, with Eigen): the same checks then run on the host, which tests the
// tests' own reference loops where no GPU is at hand, and the CPU backend on the way.
#pragma once

#if defined(ATTN_GPU_TEST_HOST)
#include <attn/attn.hpp>
#else
#include <attn/cuda/cuda.cuh>
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace gpu_test {

using attn::index_t;

#if defined(ATTN_GPU_TEST_HOST)
using device = attn::cpu;
#else
using device = attn::cuda;
#endif

// ---------------------------------------------------------------------------------------
// Outcomes.

struct tally {
  int checks = 0;
  int failures = 0;
};
inline tally& results() {
  static tally t;
  return t;
}

inline void pass(const std::string& name, const std::string& detail) {
  ++results().checks;
  std::printf("ok    %-58s %s\n", name.c_str(), detail.c_str());
}
inline void fail(const std::string& name, const std::string& detail) {
  ++results().checks;
  ++results().failures;
  std::printf("FAIL  %-58s %s\n", name.c_str(), detail.c_str());
}
/// Records one boolean check.
inline void expect(bool condition, const std::string& name, const std::string& detail = "") {
  condition ? pass(name, detail) : fail(name, detail);
}

/// The exit status: 1 when any check failed.
inline int finish() {
  std::printf("\n%d checks, %d failed\n", results().checks, results().failures);
  std::fflush(stdout);
  return results().failures == 0 ? 0 : 1;
}

/// 77 (Meson's SKIP) when there is no CUDA device, else 0.
inline int skip_without_device() {
#if defined(ATTN_GPU_TEST_HOST)
  std::printf("host build: checking against the CPU backend\n");
  return 0;
#else
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("no CUDA device: skipping (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  return 0;
#endif
}

/// After each operation: launch errors now, execution errors once the device is done.
inline void settle(const std::string& what) {
#if !defined(ATTN_GPU_TEST_HOST)
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
  if (status != cudaSuccess)
    throw std::runtime_error(what + ": " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
#else
  (void)what;
#endif
}

#if !defined(ATTN_GPU_TEST_HOST)
inline void cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
#endif

// ---------------------------------------------------------------------------------------
// Inputs.

inline std::mt19937_64& generator() {
  static std::mt19937_64 g(0x5eed'a77e'0001ull);
  return g;
}

/// Uniform values in [lo, hi) (integers: whole numbers in [lo, hi]; bool: fair coins).
template <class T, class S>
attn::tensor<T, S, attn::cpu> random_host(const attn::extents<S>& sizes, double lo = -1.0,
                                         double hi = 1.0) {
  attn::tensor<T, S, attn::cpu> t(sizes);
  for (index_t i = 0; i < t.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      t.data()[i] = std::bernoulli_distribution(0.5)(generator());
    } else if constexpr (std::is_integral_v<T>) {
      t.data()[i] = static_cast<T>(std::uniform_int_distribution<long long>(
          static_cast<long long>(lo), static_cast<long long>(hi))(generator()));
    } else {
      t.data()[i] = static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(generator()));
    }
  }
  return t;
}

/// A copy of host elements on the device under test.
template <class T, class S>
attn::tensor<T, S, device> upload(const attn::tensor<T, S, attn::cpu>& host) {
#if defined(ATTN_GPU_TEST_HOST)
  return host;
#else
  auto result = attn::cuda_backend::to_device(host);
  settle("upload");
  return result;
#endif
}

/// A host copy of elements on the device under test.
template <class T, class S>
attn::tensor<T, S, attn::cpu> download(const attn::tensor<T, S, device>& t) {
#if defined(ATTN_GPU_TEST_HOST)
  return t;
#else
  settle("before download");
  return attn::cuda_backend::to_host(t);
#endif
}

// ---------------------------------------------------------------------------------------
// Indices.

template <std::size_t R>
using index_array = std::array<index_t, R>;

/// The multi-index of row-major position `flat`.
template <class S>
index_array<S::rank> unflatten(const attn::extents<S>& sizes, index_t flat) {
  index_array<S::rank> index{};
  for (std::size_t r = S::rank; r-- > 0;) {
    index[r] = flat % sizes[r];
    flat /= sizes[r];
  }
  return index;
}

/// The row-major position of a multi-index.
template <class S>
index_t flatten(const attn::extents<S>& sizes, const index_array<S::rank>& index) {
  index_t flat = 0;
  for (std::size_t r = 0; r < S::rank; ++r) flat = flat * sizes[r] + index[r];
  return flat;
}

/// Element of a host tensor at a multi-index, as a double.
template <class T, class S>
double at(const attn::tensor<T, S, attn::cpu>& t, const index_array<S::rank>& index) {
  return static_cast<double>(t.data()[flatten(t.extents(), index)]);
}

/// f(index) for every multi-index of `sizes`, in row-major order: a reference result.
template <class S, class F>
std::vector<double> reference(const attn::extents<S>& sizes, F&& f) {
  std::vector<double> values(static_cast<std::size_t>(sizes.size()));
  for (index_t flat = 0; flat < sizes.size(); ++flat)
    values[static_cast<std::size_t>(flat)] = static_cast<double>(f(unflatten(sizes, flat)));
  return values;
}

// ---------------------------------------------------------------------------------------
// Guarded outputs.

/// Floating types, the 16-bit storage types included.
template <class T>
inline constexpr bool is_real = std::is_floating_point_v<T> || attn::is_float16_storage<T>;

/// A quiet NaN of a floating type.
template <class T>
T quiet_nan() {
  if constexpr (std::is_same_v<T, attn::bfloat16>) return attn::bfloat16::from_bits(0x7FC0);
  else if constexpr (std::is_same_v<T, attn::float16>) return attn::float16::from_bits(0x7E00);
  else return std::numeric_limits<T>::quiet_NaN();
}

/// Bytes that no correct kernel writes: NaN for floating types (NaN never passes a check),
/// 0xA5 for the others (not a valid bool either).
template <class T>
std::vector<unsigned char> sentinel_bytes(index_t count) {
  std::vector<unsigned char> bytes(static_cast<std::size_t>(count) * sizeof(T), 0xA5);
  if constexpr (is_real<T>) {
    const T nan = quiet_nan<T>();
    for (index_t i = 0; i < count; ++i)
      std::memcpy(bytes.data() + static_cast<std::size_t>(i) * sizeof(T), &nan, sizeof(T));
  }
  return bytes;
}

/// An output with `pad` sentinel elements on either side, its own elements sentinels too
/// until written: out-of-bounds writes show as changed guards, missed elements as NaN. 67 by
/// default, an odd number that leaves the output misaligned for every vector access; a multiple
/// of 16 (aligned_pad) lets the elementwise kernel take runs (elementwise_vectors.cuh).
inline constexpr index_t aligned_pad = 64;

template <class T, class S>
class guarded {
 public:
  explicit guarded(const attn::extents<S>& sizes, index_t pad = 67)
      : sizes_(sizes), pad_(pad), total_(sizes.size() + 2 * pad), pattern_(sentinel_bytes<T>(total_)) {
#if defined(ATTN_GPU_TEST_HOST)
    base_ = static_cast<T*>(::operator new(pattern_.size()));
    std::memcpy(base_, pattern_.data(), pattern_.size());
#else
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, pattern_.size()), "cudaMalloc (guarded output)");
    base_ = static_cast<T*>(p);
    cuda_ok(cudaMemcpy(base_, pattern_.data(), pattern_.size(), cudaMemcpyHostToDevice),
            "cudaMemcpy (sentinels)");
#endif
  }
  guarded(const guarded&) = delete;
  guarded& operator=(const guarded&) = delete;
  ~guarded() {
#if defined(ATTN_GPU_TEST_HOST)
    ::operator delete(base_);
#else
    (void)cudaDeviceSynchronize();
    (void)cudaFree(base_);
#endif
  }

  attn::tensor_view<T, S, device> view() const { return {base_ + pad_, sizes_}; }

  /// The output's elements; `guards_intact` tells whether the padding still holds sentinels.
  attn::tensor<T, S, attn::cpu> fetch(bool& guards_intact) const {
    std::vector<unsigned char> bytes(pattern_.size());
#if defined(ATTN_GPU_TEST_HOST)
    std::memcpy(bytes.data(), base_, bytes.size());
#else
    settle("before fetch");
    cuda_ok(cudaMemcpy(bytes.data(), base_, bytes.size(), cudaMemcpyDeviceToHost),
            "cudaMemcpy (fetch)");
#endif
    const std::size_t guard = static_cast<std::size_t>(pad_) * sizeof(T);
    const std::size_t body = static_cast<std::size_t>(sizes_.size()) * sizeof(T);
    guards_intact = std::memcmp(bytes.data(), pattern_.data(), guard) == 0 &&
                    std::memcmp(bytes.data() + guard + body, pattern_.data() + guard + body,
                                guard) == 0;
    attn::tensor<T, S, attn::cpu> out(sizes_);
    // Bools are checked byte-wise first: a byte other than 0 or 1 is an unwritten sentinel.
    if constexpr (std::is_same_v<T, bool>) {
      for (std::size_t i = 0; i < body; ++i)
        if (bytes[guard + i] > 1) unwritten_ = true;
      for (std::size_t i = 0; i < body; ++i) out.data()[i] = bytes[guard + i] == 1;
    } else if (body != 0) {
      std::memcpy(out.data(), bytes.data() + guard, body);
    }
    return out;
  }
  /// For bool outputs: whether some element still held the sentinel byte.
  bool unwritten() const { return unwritten_; }

 private:
  attn::extents<S> sizes_;
  index_t pad_;
  index_t total_;
  std::vector<unsigned char> pattern_;
  T* base_ = nullptr;
  mutable bool unwritten_ = false;
};

// ---------------------------------------------------------------------------------------
// Comparisons.

/// For the 16-bit types, in units in the last place, element by element (see compare): half a
/// unit is what rounding a float result once to 16 bits may cost.
template <class T>
inline constexpr double default_tolerance =
    attn::is_float16_storage<T> ? 0.5 : std::is_same_v<T, double> ? 1e-12 : 1e-5;

/// A unit in the last place of a 16-bit type T at x (bfloat16: 8 significant bits and float's
/// exponents; float16: 11 bits, subnormals below 2⁻¹⁴).
template <class T>
double ulp_of(double x) {
  constexpr int bits = std::is_same_v<T, attn::bfloat16> ? 8 : 11;
  constexpr int min_exponent = std::is_same_v<T, attn::bfloat16> ? -126 : -14;
  const int exponent = x == 0 ? min_exponent : std::max(min_exponent, std::ilogb(x));
  return std::ldexp(1.0, exponent - (bits - 1));
}

/// 16-bit outputs: every element within `ulps` units in the last place of the reference (which
/// is computed in double from the same 16-bit inputs), plus 2⁻¹⁶·(1 + |ref|) for the float
/// arithmetic before the one rounding. A result rounded at every node instead of once fails.
/// `rounded_first`, where given, holds an intermediate that the computation may round to T
/// before its last step (cuBLASLt's bfloat16 bias epilogue): half a unit of it more.
template <class T, class S>
void compare_rounded(const std::string& name, const attn::tensor<T, S, attn::cpu>& out,
                     const std::vector<double>& ref, double ulps,
                     const std::vector<double>* rounded_first = nullptr) {
  const std::size_t n = ref.size();
  if (static_cast<std::size_t>(out.size()) != n) {
    fail(name, "size " + std::to_string(out.size()) + " vs reference " + std::to_string(n));
    return;
  }
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double o = static_cast<double>(out.data()[i]);
    const double r = ref[i];
    if (std::isnan(r) || std::isinf(r) || !std::isfinite(o)) {
      if (!(std::isnan(r) ? std::isnan(o) : o == r)) {
        char detail[160];
        std::snprintf(detail, sizeof detail, "n=%zu: element %zu is %.9g, expected %.9g", n, i, o, r);
        fail(name, detail);
        return;
      }
      continue;
    }
    const double first = rounded_first ? 0.5 * ulp_of<T>((*rounded_first)[i]) : 0.0;
    const double error = (std::abs(o - r) - first - std::ldexp(1.0 + std::abs(r), -16)) / ulp_of<T>(r);
    worst = std::max(worst, error);
    if (!(error <= ulps)) {
      char detail[200];
      std::snprintf(detail, sizeof detail, "n=%zu: element %zu is %.9g, expected %.9g (%.3g units in the last place > %.2g)",
                    n, i, o, r, error, ulps);
      fail(name, detail);
      return;
    }
  }
  char detail[96];
  std::snprintf(detail, sizeof detail, "n=%zu, within %.2g units in the last place", n, std::max(worst, 0.0));
  pass(name, detail);
}

/// ‖out − ref‖ / ‖ref‖ below `tolerance` (floating types) or equality (the others). A NaN
/// in out never passes unless ref has one there; infinite references must match exactly.
/// 16-bit outputs go to compare_rounded, `tolerance` then counting units in the last place
/// (and `rounded_first`, where given, an intermediate that may be rounded once more).
template <class T, class S>
void compare(const std::string& name, const attn::tensor<T, S, attn::cpu>& out,
             const std::vector<double>& ref, double tolerance,
             const std::vector<double>* rounded_first = nullptr) {
  if constexpr (attn::is_float16_storage<T>) {
    compare_rounded(name, out, ref, tolerance, rounded_first);
    return;
  }
  const std::size_t n = ref.size();
  if (static_cast<std::size_t>(out.size()) != n) {
    fail(name, "size " + std::to_string(out.size()) + " vs reference " + std::to_string(n));
    return;
  }
  double diff2 = 0;
  double ref2 = 0;
  std::size_t bad = n;  // first element that cannot pass whatever the norms say
  std::size_t worst = 0;
  double worst_error = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const double o = static_cast<double>(out.data()[i]);
    const double r = ref[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(r) || std::isinf(r)) {
        const bool same = std::isnan(r) ? std::isnan(o) : o == r;
        if (!same && bad == n) bad = i;
        continue;
      }
      if (!std::isfinite(o)) {
        if (bad == n) bad = i;
        continue;
      }
      diff2 += (o - r) * (o - r);
      ref2 += r * r;
      if (std::abs(o - r) > worst_error) {
        worst_error = std::abs(o - r);
        worst = i;
      }
    } else {
      if (o != r && bad == n) bad = i;
    }
  }
  char detail[256];
  if (bad != n) {
    std::snprintf(detail, sizeof detail, "n=%zu: element %zu is %.9g, expected %.9g", n, bad,
                  static_cast<double>(out.data()[bad]), ref[bad]);
    fail(name, detail);
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    const double error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    if (!(error <= tolerance)) {
      std::snprintf(detail, sizeof detail,
                    "n=%zu: relative error %.3g > %.1g (worst: element %zu is %.9g, expected %.9g)",
                    n, error, tolerance, worst, static_cast<double>(out.data()[worst]), ref[worst]);
      fail(name, detail);
      return;
    }
    std::snprintf(detail, sizeof detail, "n=%zu, relative error %.2g", n, error);
  } else {
    std::snprintf(detail, sizeof detail, "n=%zu, exact", n);
  }
  pass(name, detail);
}

/// Checks an output already fetched from a guarded buffer.
template <class T, class S>
void compare_guarded(const std::string& name, const guarded<T, S>& out, const std::vector<double>& ref,
                     double tolerance = default_tolerance<T>, const std::vector<double>* rounded_first = nullptr) {
  bool guards_intact = false;
  const auto host = out.fetch(guards_intact);
  if (!guards_intact) {
    fail(name, "wrote outside its output (guard sentinels changed)");
    return;
  }
  if (out.unwritten()) {
    fail(name, "left elements unwritten (sentinel bytes remain)");
    return;
  }
  compare(name, host, ref, tolerance, rounded_first);
}

/// Evaluates `e` into a guarded output and compares it with the reference: f(index) for
/// every multi-index of the result.
template <class E, class F>
void check(const std::string& name, const E& e, F&& f,
           double tolerance = default_tolerance<typename E::value_type>) {
  using T = typename E::value_type;
  using S = typename E::shape_type;
  try {
    guarded<T, S> out(e.extents());
    out.view() = e;
    settle(name);
    compare_guarded(name, out, reference(e.extents(), f), tolerance);
  } catch (const std::exception& error) {
    fail(name, std::string("threw: ") + error.what());
  }
}

/// As check, for a 16-bit result that may be rounded twice: `f` the result, `first` the
/// intermediate rounded before the last step (compare_rounded).
template <class E, class F, class G>
void check_rounded_twice(const std::string& name, const E& e, F&& f, G&& first) {
  using T = typename E::value_type;
  using S = typename E::shape_type;
  static_assert(attn::is_float16_storage<T>, "check_rounded_twice: for 16-bit results");
  try {
    guarded<T, S> out(e.extents());
    out.view() = e;
    settle(name);
    const auto intermediate = reference(e.extents(), first);
    compare_guarded(name, out, reference(e.extents(), f), default_tolerance<T>, &intermediate);
  } catch (const std::exception& error) {
    fail(name, std::string("threw: ") + error.what());
  }
}

/// Runs `body`, reporting an exception as a failure of `name` instead of ending the test.
template <class F>
void guard_exceptions(const std::string& name, F&& body) {
  try {
    body();
  } catch (const std::exception& error) {
    fail(name, std::string("threw: ") + error.what());
  }
}

}  // namespace gpu_test
