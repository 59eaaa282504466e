// The GPU's reduction kernels (cuda/attn/cuda/reduce_kernels.cuh) on the CPU emulator, against
// plain loops: columns cut into chunks (a bias's gradient over a batch's positions), columns
// walked whole, and rows. The operands are small integers, so that every sum is exact in float
// whatever the order: a row read twice or missed, or a chunk combined into the wrong column,
// changes the result, where a tolerance might let it pass. The rows and plain columns kernels
// run on grids of a few blocks, which sends their grid-stride loops round more often; the
// chunks kernel on the grid reduce.cuh launches.
#include <attn/cuda/emulator.hpp>  // first: the kernels below are compiled for it

#include <attn/cuda/reduce_kernels.cuh>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using attn::index_t;
namespace kernels = attn::cuda_backend::reduce_kernels;
namespace emulator = attn::cuda_emulator;
using chunks_of = kernels::column_chunks;

enum class kind { sum, max, mean };

/// The reduction of [outer, length, inner] over length, in double, as a plain loop.
template <class In>
std::vector<double> reference(kind k, const std::vector<In>& in, index_t outer, index_t length, index_t inner) {
  std::vector<double> out(std::size_t(outer * inner));
  for (index_t o = 0; o < outer; ++o)
    for (index_t c = 0; c < inner; ++c) {
      double acc = k == kind::max ? -1e300 : 0.0;
      for (index_t j = 0; j < length; ++j) {
        const double x = double(float(in[std::size_t((o * length + j) * inner + c)]));
        acc = k == kind::max ? std::max(acc, x) : acc + x;
      }
      // The kernels divide in the operand's compute type and round to the float result.
      using C = attn::accumulate_t<In>;
      out[std::size_t(o * inner + c)] = k == kind::mean ? double(float(C(acc) / C(length))) : acc;
    }
  return out;
}

/// reduce.cuh's choice of kernels for the layout, launched on the emulator.
template <class Op, class In>
std::vector<float> reduce(const std::vector<In>& in, index_t outer, index_t length, index_t inner) {
  std::vector<float> out(std::size_t(outer * inner), -12345.0f);
  const chunks_of chunks(length, outer * inner);
  if (inner == 1) {
    // A warp a row, or a block a row.
    if (length >= 1024) emulator::launch(kernels::rows_kernel<Op, In, float, kernels::block>, dim3(3),
                                         dim3(kernels::block), 0, in.data(), out.data(), outer, length);
    else emulator::launch(kernels::rows_kernel<Op, In, float, 32>, dim3(2), dim3(kernels::block), 0, in.data(),
                          out.data(), outer, length);
  } else if (!chunks.cut()) {
    emulator::launch(kernels::columns_kernel<Op, In, float>, dim3(2), dim3(kernels::block), 0, in.data(), out.data(),
                     outer, length, inner);
  } else {
    const index_t outputs = outer * inner;
    using C = attn::accumulate_t<In>;
    std::vector<C> partial(std::size_t(outputs * chunks.count), std::numeric_limits<C>::quiet_NaN());
    const auto column_blocks = unsigned(chunks_of::column_blocks(outputs));
    emulator::launch(kernels::column_chunks_kernel<Op, In, C, false>, dim3(column_blocks, unsigned(chunks.count)),
                     dim3(kernels::block), 0, in.data(), partial.data(), outputs, length, inner, chunks.rows, length);
    emulator::launch(kernels::column_chunks_kernel<Op, C, float, true>, dim3(column_blocks), dim3(kernels::block), 0,
                     static_cast<const C*>(partial.data()), out.data(), outputs, chunks.count, outputs, chunks.count,
                     length);
  }
  return out;
}

template <class In>
void check_layout(index_t outer, index_t length, index_t inner) {
  std::mt19937 random(unsigned(outer * 1000003 + length * 31 + inner));
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<In> in(std::size_t(outer * length * inner));
  for (auto& x : in) x = In(float(small(random)));
  const std::string layout =
      "[" + std::to_string(outer) + ", " + std::to_string(length) + ", " + std::to_string(inner) + "]";
  const auto compare = [&](const std::string& what, const std::vector<float>& got, const std::vector<double>& expected) {
    for (std::size_t i = 0; i < got.size(); ++i)
      if (double(got[i]) != expected[i]) {
        FAIL_CHECK(what << " over " << layout << ": output " << i << " is " << got[i] << ", expected "
                        << expected[i]);
        return;
      }
  };
  compare("sum", reduce<attn::op::sum>(in, outer, length, inner), reference(kind::sum, in, outer, length, inner));
  compare("max", reduce<attn::op::max>(in, outer, length, inner), reference(kind::max, in, outer, length, inner));
  compare("mean", reduce<attn::op::mean>(in, outer, length, inner), reference(kind::mean, in, outer, length, inner));
}

}  // namespace

TEST_CASE("reduce kernels: a column's chunks depend on its shape alone") {
  CHECK_FALSE(chunks_of(0, 40).cut());
  CHECK_FALSE(chunks_of(255, 40).cut());
  CHECK(chunks_of(255, 40).rows == 255);
  CHECK(chunks_of(256, 40).count == 2);
  CHECK(chunks_of(256, 40).rows == 128);
  CHECK(chunks_of(257, 40).count == 3);
  // A bias's gradient: about 2 048 blocks in all.
  CHECK(chunks_of(25'000, 512).rows == 196);
  CHECK(chunks_of(25'000, 512).count == 128);
  CHECK(chunks_of(25'000, 2048).count == 32);
  CHECK(chunks_of(8'000, 512).count == 63);  // 128 rows at least
  // Outputs that make 2 048 blocks alone are not cut.
  CHECK_FALSE(chunks_of(25'000, 2048 * 32).cut());
  CHECK(chunks_of(25'000, 2047 * 32).cut() == false);  // 1 chunk wanted
  for (const index_t length : {index_t{256}, index_t{1000}, index_t{65'535} * 128 + 1, index_t{1} << 33})
    for (const index_t outputs : {index_t{1}, index_t{33}, index_t{512}, index_t{5000}}) {
      const chunks_of c(length, outputs);
      CHECK(c.count <= chunks_of::blocks_wanted);
      CHECK(c.count * c.rows >= length);
      CHECK((c.count - 1) * c.rows < length);
      CHECK((!c.cut() || c.rows >= chunks_of::rows_at_least));
      CHECK(chunks_of::column_blocks(outputs) * c.count <= 2 * chunks_of::blocks_wanted);
    }
}

TEST_CASE("reduce kernels: columns cut into chunks, walked whole, and rows, against loops (emulated)") {
  // Cut: a chunk and a row lane's loop end mid-chunk, outputs fill a block or not, an outer
  // dimension's columns meet inside a block's 32.
  check_layout<float>(1, 300, 40);
  check_layout<float>(3, 1000, 7);
  check_layout<float>(2, 257, 33);
  check_layout<float>(1, 256, 2);
  check_layout<float>(1, 2049, 64);
  check_layout<double>(2, 513, 5);
  check_layout<attn::bfloat16>(1, 700, 48);
  check_layout<attn::float16>(2, 300, 17);
  // Whole columns and rows.
  check_layout<float>(1, 255, 40);
  check_layout<float>(4, 3, 33);
  check_layout<attn::bfloat16>(3, 100, 9);
  check_layout<float>(17, 33, 1);
  check_layout<float>(5, 1500, 1);
  check_layout<attn::bfloat16>(9, 1024, 1);
}
