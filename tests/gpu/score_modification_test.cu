// A score modification's device form (cuda/attn/cuda/score_modification.cuh: the expression's
// coordinate plans with the score given, and index plans for the learned inputs) against its host
// form (grad/fused_attention.hpp's evaluated_modification: element_at and input_offset), at every
// score of a small [batch, heads, queries, keys], on the GPU: the modified score, its derivative by
// the score, and what each score adds to each input's gradient.
// The modifications of score_modification_cases.hpp.
// tests/unit/cuda/score_modification_test.cpp runs the same plans on the CPU.
#include "gpu_test.cuh"
#include "score_modification_cases.hpp"

#include <attn/cuda/score_modification.cuh>
#include <attn/grad/fused_attention.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;
using attn::tensor;

using namespace score_modification_cases;

/// At every score of [batch, heads, queries, keys] = sizes: the modified score, its derivative,
/// and (a row of `size` numbers a score) what accumulate adds with d_score = 1.
template <class M>
__global__ void evaluate_each(M m, attn::cuda_backend::score_position sizes, float* values, float* slopes,
                              float* gradients) {
  const std::int64_t at = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= sizes.index[0] * sizes.index[1] * sizes.index[2] * sizes.index[3]) return;
  attn::cuda_backend::score_position c{};
  for (std::int64_t r = 3, rest = at; r >= 0; --r) {
    c.index[r] = rest % sizes.index[r];
    rest /= sizes.index[r];
  }
  values[at] = m(c, given(at));
  slopes[at] = m.derivative(c, given(at));
  m.accumulate(c, given(at), 1.0f, gradients + at * m.size);
}

/// The same on the host, from the host form.
template <class E>
void host_each(const E& e, const extents<S>& sizes, std::vector<float>& values, std::vector<float>& slopes,
               std::vector<float>& gradients) {
  const index_t count = sizes.size(), size = e.gradient_size();
  values.assign(std::size_t(count), 0);
  slopes.assign(std::size_t(count), 0);
  gradients.assign(std::size_t(count * size), 0);
  for (index_t at = 0; at < count; ++at) {
    const auto c = attn::detail::from_row_major<S>(at, sizes);
    values[std::size_t(at)] = e(c, given(at));
    slopes[std::size_t(at)] = e.derivative(c, given(at));
    e.accumulate(c, given(at), 1.0f, gradients.data() + at * size);
  }
}

std::vector<float> download_floats(const float* x, index_t n) {
  std::vector<float> host(std::size_t(std::max<index_t>(n, 0)));
  settle("before download");
  cuda_ok(cudaMemcpy(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

double largest_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(double(got[i]) - double(want[i])) / std::max(1.0, std::abs(double(want[i])));
    worst = std::isfinite(got[i]) ? std::max(worst, d) : std::numeric_limits<double>::infinity();
  }
  return worst;
}

/// The device form m at every score against the host form's values, slopes and gradients.
template <class M>
void compare_on_device(const std::string& name, const M& m, const extents<S>& sizes, const std::vector<float>& values,
                       const std::vector<float>& slopes, const std::vector<float>& gradients) {
  const index_t count = sizes.size();
  float *values_d = nullptr, *slopes_d = nullptr, *gradients_d = nullptr;
  cuda_ok(cudaMalloc(&values_d, count * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(&slopes_d, count * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(&gradients_d, count * m.size * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMemset(gradients_d, 0, count * m.size * sizeof(float)), "cudaMemset");
  const attn::cuda_backend::score_position bounds{{sizes[0], sizes[1], sizes[2], sizes[3]}};
  evaluate_each<<<unsigned((count + 127) / 128), 128, 0, attn::cuda_backend::stream()>>>(m, bounds, values_d,
                                                                                         slopes_d, gradients_d);
  cuda_ok(cudaGetLastError(), "evaluate_each");
  const double value_error = largest_difference(download_floats(values_d, count), values);
  const double slope_error = largest_difference(download_floats(slopes_d, count), slopes);
  const double gradient_error = largest_difference(download_floats(gradients_d, count * m.size), gradients);
  for (float* p : {values_d, slopes_d, gradients_d}) cudaFree(p);
  // The same float operations on both sides; tanh and the compilers' contractions may differ
  // in the last place.
  const double tolerance = 1e-6;
  char detail[96];
  std::snprintf(detail, sizeof detail, "largest relative difference %.2e", value_error);
  expect(value_error < tolerance, name + ": modified scores", detail);
  std::snprintf(detail, sizeof detail, "largest relative difference %.2e", slope_error);
  expect(slope_error < tolerance, name + ": derivative by the score", detail);
  std::snprintf(detail, sizeof detail, "largest relative difference %.2e", gradient_error);
  expect(gradient_error < tolerance, name + ": inputs' gradients, at the elements read", detail);
}

/// f(s, x) with x's values host_x, on both sides; x learns.
template <class F, class X>
void compare(const std::string& name, const F& f, const tensor<float, X, attn::cpu>& host_x) {
  const extents<S> sizes = score_modification_cases::sizes();
  attn::grad::variable<float, X, attn::cpu> x_host(tensor<float, X, attn::cpu>(host_x), true);
  attn::grad::variable<float, X, attn::cuda> x_device(upload(host_x), true);
  const auto on_host = attn::grad::detail::evaluate_modification<float, S, attn::cpu>(
      attn::grad::modify_scores(f, x_host), sizes, true);
  const auto evaluated = attn::grad::detail::evaluate_modification<float, S, attn::cuda>(
      attn::grad::modify_scores(f, x_device), sizes, true);
  const auto on_device = attn::cuda_backend::device_modification(evaluated);
  expect(on_device.size == on_host.gradient_size() && on_device.size == host_x.size(), name + ": gradient size");

  std::vector<float> values, slopes, gradients;
  host_each(on_host, sizes, values, slopes, gradients);
  compare_on_device(name, on_device, sizes, values, slopes, gradients);
}

}  // namespace

int main() {
  if (const int status = skip_without_device(); status != 0) return status;
  guard_exceptions("score modification", [] {
    for_each([](const auto&... c) { compare(c...); },
             [](const auto& sizes, double lo, double hi) { return random_host<float>(sizes, lo, hi); });
  });
  return finish();
}
