// attn's 16-bit floats (include/attn/core/float16.hpp) in device code against CUDA's own
// conversions (cuda_bf16.h, cuda_fp16.h: cvt.rn): every 16-bit value widened to float, and a
// sample of every binade of float (ties and their neighbours included) rounded to 16 bits, must
// give the same bits. The host side is tested exhaustively in tests/unit/core/float16_test.cpp.
#include "gpu_test.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace gpu_test;

/// Per float x: attn's bfloat16 and float16 bits, then CUDA's.
__global__ void narrow(const float* x, std::uint16_t* ours_bf, std::uint16_t* ours_half, std::uint16_t* theirs_bf,
                       std::uint16_t* theirs_half, int n) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i >= n) return;
  ours_bf[i] = attn::bfloat16(x[i]).bits;
  ours_half[i] = attn::float16(x[i]).bits;
  theirs_bf[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
  theirs_half[i] = __half_as_ushort(__float2half_rn(x[i]));
}

/// Per 16-bit pattern b: attn's widening of both types, then CUDA's.
__global__ void widen(float* ours_bf, float* ours_half, float* theirs_bf, float* theirs_half) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i >= 0x10000) return;
  const auto b = std::uint16_t(i);
  ours_bf[i] = float(attn::bfloat16::from_bits(b));
  ours_half[i] = float(attn::float16::from_bits(b));
  theirs_bf[i] = __bfloat162float(__ushort_as_bfloat16(b));
  theirs_half[i] = __half2float(__ushort_as_half(b));
}

template <class T>
T* device_array(std::size_t n) {
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* d, std::size_t n) {
  std::vector<T> h(n);
  cuda_ok(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return h;
}

/// Same bits, NaN matching any NaN.
bool same(float a, float b) {
  if (a != a && b != b) return true;
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

void check_widening() {
  const std::size_t n = 0x10000;
  float *ob = device_array<float>(n), *oh = device_array<float>(n), *tb = device_array<float>(n),
        *th = device_array<float>(n);
  widen<<<int(n / 256), 256>>>(ob, oh, tb, th);
  cuda_ok(cudaGetLastError(), "widen");
  const auto ours_bf = host_copy(ob, n), ours_half = host_copy(oh, n), theirs_bf = host_copy(tb, n),
             theirs_half = host_copy(th, n);
  int bf_differences = 0, half_differences = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bf_differences += !same(ours_bf[i], theirs_bf[i]);
    half_differences += !same(ours_half[i], theirs_half[i]);
  }
  expect(bf_differences == 0, "bfloat16 → float, every value", std::to_string(bf_differences) + " differ");
  expect(half_differences == 0, "float16 → float, every value", std::to_string(half_differences) + " differ");
  for (float* p : {ob, oh, tb, th}) cudaFree(p);
}

void check_rounding() {
  // Every 4093rd float pattern, and for every 16-bit value its float, the ties to the next one
  // and the floats beside each tie.
  std::vector<float> x;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4093) {
    const auto bits = std::uint32_t(b);
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float bf = float(attn::bfloat16::from_bits(std::uint16_t(b)));
    const float bf_next = float(attn::bfloat16::from_bits(std::uint16_t(b + 1)));
    const float half = float(attn::float16::from_bits(std::uint16_t(b)));
    const float half_next = float(attn::float16::from_bits(std::uint16_t(b + 1)));
    for (float f : {bf, half}) x.push_back(f);
    if ((b & 0x7FFF) == 0x7FFF) continue;
    for (auto [lo, hi] : {std::pair{bf, bf_next}, std::pair{half, half_next}}) {
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      const float tie = lo + (hi - lo) / 2;
      x.insert(x.end(), {tie, std::nextafter(tie, lo), std::nextafter(tie, hi)});
    }
  }
  const int n = int(x.size());
  float* xd = device_array<float>(x.size());
  cuda_ok(cudaMemcpy(xd, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  std::uint16_t *ob = device_array<std::uint16_t>(x.size()), *oh = device_array<std::uint16_t>(x.size()),
                *tb = device_array<std::uint16_t>(x.size()), *th = device_array<std::uint16_t>(x.size());
  narrow<<<(n + 255) / 256, 256>>>(xd, ob, oh, tb, th, n);
  cuda_ok(cudaGetLastError(), "narrow");
  const auto ours_bf = host_copy(ob, x.size()), ours_half = host_copy(oh, x.size()), theirs_bf = host_copy(tb, x.size()),
             theirs_half = host_copy(th, x.size());
  int bf_differences = 0, half_differences = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != x[i]) continue;  // NaN: both give a NaN, payloads may differ
    bf_differences += ours_bf[i] != theirs_bf[i];
    half_differences += ours_half[i] != theirs_half[i];
  }
  expect(bf_differences == 0, "float → bfloat16, " + std::to_string(n) + " floats",
         std::to_string(bf_differences) + " differ");
  expect(half_differences == 0, "float → float16, " + std::to_string(n) + " floats",
         std::to_string(half_differences) + " differ");
  cudaFree(xd);
  for (std::uint16_t* p : {ob, oh, tb, th}) cudaFree(p);
}

}  // namespace

int main() {
  if (const int status = skip_without_device(); status != 0) return status;
  guard_exceptions("float16", [] {
    check_widening();
    check_rounding();
  });
  return finish();
}
