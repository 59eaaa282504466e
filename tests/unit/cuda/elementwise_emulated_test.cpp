// The GPU's elementwise kernel (cuda/attn/cuda/elementwise_kernel.cuh) on the CPU emulator: every
// element computed once and stored once, whole rounds and the partial last one, at sizes around
// the grid's width and its multiples; 16-bit results rounded as they are stored. The plan counts
// its calls a position (the emulator runs one thread at a time, so a plain count is exact), which
// a loop that skipped an element or computed one twice would change.
#include <attn/cuda/emulator.hpp>  // first: the kernel below is compiled for it

#include <attn/cuda/elementwise_kernel.cuh>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using attn::index_t;
namespace emulator = attn::cuda_emulator;

/// plan(i) = a[i] · 3 + b[i mod 7] + 0.25, counting its calls at i.
struct counting_plan {
  const float* a;
  const float* b;
  unsigned* calls;
  template <class I>
  float operator()(I i) const {
    ++calls[i];
    return a[i] * 3.0f + b[i % 7] + 0.25f;
  }
};

template <class T, class Index, int Unroll>
void check(index_t size, unsigned blocks, unsigned threads) {
  std::vector<float> a(std::size_t(size) + 1), b(7);
  for (index_t i = 0; i <= size; ++i) a[std::size_t(i)] = float(i % 101) - 50.0f + 1.0f / 3.0f;
  for (int j = 0; j < 7; ++j) b[std::size_t(j)] = float(j) * 0.5f;
  std::vector<unsigned> calls(std::size_t(size) + 1, 0);
  const T sentinel = T(-12345.0f);
  std::vector<T> out(std::size_t(size) + 1, sentinel);  // one past the end, never written
  const counting_plan plan{a.data(), b.data(), calls.data()};
  emulator::launch(attn::cuda_backend::elementwise_kernel<counting_plan, T, Index, Unroll>, dim3(blocks),
                   dim3(threads), 0, plan, out.data(), static_cast<Index>(size));
  const std::string where = "size " + std::to_string(size) + ", " + std::to_string(blocks) + " blocks of " +
                            std::to_string(threads) + ", " + std::to_string(Unroll) + " a round";
  for (index_t i = 0; i < size; ++i) {
    const auto at = std::size_t(i);
    const T expected = T(a[at] * 3.0f + b[at % 7] + 0.25f);
    if (calls[at] != 1 || !(out[at] == expected)) {
      FAIL_CHECK(where << ": element " << i << " computed " << calls[at] << " times, stored "
                       << float(out[at]) << ", expected " << float(expected));
      return;
    }
  }
  CHECK_MESSAGE(calls[std::size_t(size)] == 0, where << ": the plan was called past the end");
  CHECK_MESSAGE(out[std::size_t(size)] == sentinel, where << ": an element past the end was stored");
}

template <class T, class Index, int Unroll>
void check_sizes() {
  for (const unsigned blocks : {1u, 3u})
    for (const unsigned threads : {32u, 64u}) {
      const index_t step = index_t(blocks) * threads;
      for (const index_t size :
           {index_t{0}, index_t{1}, step - 1, step, step + 1, (Unroll - 1) * step, (Unroll - 1) * step + 1,
            Unroll * step - 1, Unroll * step, Unroll * step + 1, 3 * Unroll * step + step / 2 + 5})
        if (size >= 0) check<T, Index, Unroll>(size, blocks, threads);
    }
}

}  // namespace

TEST_CASE("elementwise kernel: every element computed and stored once, in rounds and the partial last one "
          "(emulated)") {
  check_sizes<float, std::uint32_t, attn::cuda_backend::elementwise_unroll>();
  check_sizes<float, index_t, attn::cuda_backend::elementwise_unroll>();
  check_sizes<float, std::uint32_t, 1>();  // a thread an element, as until 2026-11-27
  check_sizes<float, std::uint32_t, 3>();
  check_sizes<attn::bfloat16, std::uint32_t, attn::cuda_backend::elementwise_unroll>();
  check_sizes<attn::float16, index_t, attn::cuda_backend::elementwise_unroll>();
  check_sizes<double, std::uint32_t, attn::cuda_backend::elementwise_unroll>();
}
