// The GPU's kernel for batched products of small matrices (cuda/attn/cuda/small_products.cuh)
// on the CPU emulator, against a plain loop: the four layouts of A and B, bfloat16, float16 and
// float operands with C in their type or float, batches that do not fill the last block, shapes
// of attention at a few words, sizes of 1, columns past a warp, matrices that start off 16 bytes
// (element by element copies) and on them (16-byte copies). The operands are small integers, so
// that every product is exact in float and in C's type: an element read from the wrong place, or
// a row or column missed, changes the result, where a tolerance might let it pass.
#include <attn/cuda/emulator.hpp>  // first: the kernels below are compiled for it

#include <attn/cuda/small_products.cuh>

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

namespace {

using attn::index_t;
namespace products = attn::cuda_backend::small_products;
namespace emulator = attn::cuda_emulator;

struct product_case {
  index_t batches, m, n, k;
  bool a_transposed, b_transposed;
  index_t offset;  // elements the operands start past their allocation's start
};

std::string name_of(const product_case& c) {
  return "batches " + std::to_string(c.batches) + ", m " + std::to_string(c.m) + ", n " + std::to_string(c.n) +
         ", k " + std::to_string(c.k) + (c.a_transposed ? ", Aᵀ" : "") + (c.b_transposed ? ", Bᵀ" : "") +
         (c.offset ? ", off by " + std::to_string(c.offset) : "");
}

/// The kernel's C for `c`, with the grid and shared memory contract.cuh launches it with, against
/// the plain loop's; every element exactly.
template <class In, class Out>
void check_product(const product_case& c) {
  CAPTURE(name_of(c));
  std::mt19937 generator(unsigned(c.batches * 1000 + c.m * 100 + c.n * 10 + c.k));
  std::uniform_int_distribution<int> small(-2, 2);
  const auto random_operand = [&](index_t count) {
    std::vector<In> x(std::size_t(count + c.offset), In(7.f));
    for (index_t i = 0; i < count; ++i) x[std::size_t(c.offset + i)] = In(float(small(generator)));
    return x;
  };
  const std::vector<In> a = random_operand(c.batches * c.m * c.k), b = random_operand(c.batches * c.k * c.n);
  std::vector<Out> out(std::size_t(c.batches * c.m * c.n + 1), Out(-4096.f));
  const auto a_at = [&](index_t batch, index_t i, index_t p) {
    const index_t within = c.a_transposed ? p * c.m + i : i * c.k + p;
    return float(a[std::size_t(c.offset + batch * c.m * c.k + within)]);
  };
  const auto b_at = [&](index_t batch, index_t p, index_t j) {
    const index_t within = c.b_transposed ? j * c.k + p : p * c.n + j;
    return float(b[std::size_t(c.offset + batch * c.k * c.n + within)]);
  };

  const products::staging<In> layout(c.m, c.n, c.k);
  emulator::launch(products::multiply<In, Out>, dim3(unsigned((c.batches + products::warps - 1) / products::warps)),
                   dim3(products::warps * 32), layout.block_bytes(), a.data() + c.offset, b.data() + c.offset,
                   out.data(), c.batches, c.m, c.n, c.k, c.a_transposed, c.b_transposed);

  index_t wrong = 0;
  std::string first_wrong;
  for (index_t batch = 0; batch < c.batches; ++batch)
    for (index_t i = 0; i < c.m; ++i)
      for (index_t j = 0; j < c.n; ++j) {
        double expected = 0;
        for (index_t p = 0; p < c.k; ++p) expected += double(a_at(batch, i, p)) * double(b_at(batch, p, j));
        const double got = double(float(out[std::size_t((batch * c.m + i) * c.n + j)]));
        if (got != expected && wrong++ == 0)
          first_wrong = "C[" + std::to_string(batch) + "][" + std::to_string(i) + "][" + std::to_string(j) +
                        "] is " + std::to_string(got) + ", expected " + std::to_string(expected);
      }
  CHECK_MESSAGE(wrong == 0, wrong, " wrong elements; the first: ", first_wrong);
  CHECK_MESSAGE(float(out.back()) == -4096.f, "an element past C was written");
}

/// Every layout of each shape.
template <class In, class Out>
void check_shapes() {
  struct shape {
    index_t batches, m, n, k, offset;
  };
  const shape shapes[] = {
      {1, 1, 1, 1, 0},     // one number
      {9, 10, 12, 64, 0},  // Q·Kᵀ at a few words, d_k 64: 16-byte copies; the last block one matrix
      {5, 12, 64, 10, 0},  // P·V, Pᵀ·dO: two columns a lane
      {6, 10, 12, 64, 1},  // off 16 bytes: copies element by element
      {3, 5, 7, 3, 0},     // matrices of 15 and 21 elements: every other one off 16 bytes
      {2, 13, 70, 5, 0},   // rows past a multiple of 4, columns past two warps' worth
      {4, 33, 2, 16, 0},   // more rows than lanes, fewer columns
      {3, 4, 8, 8, 0},     // Aᵀ stored [8][4] as it is staged: rows of 4, a 16-byte copy spans two
      {2, 2, 16, 4, 0},    // rows of 4 in A [2][4] and Bᵀ [16][4], read 8 bfloat16 at a time
  };
  for (const shape& s : shapes)
    for (const bool a_transposed : {false, true})
      for (const bool b_transposed : {false, true})
        check_product<In, Out>({s.batches, s.m, s.n, s.k, a_transposed, b_transposed, s.offset});
}

TEST_CASE("small products on the emulator: bfloat16 operands, C in bfloat16 and in float") {
  check_shapes<attn::bfloat16, attn::bfloat16>();
  check_shapes<attn::bfloat16, float>();
}

TEST_CASE("small products on the emulator: float16 operands, C in float16 and in float") {
  check_shapes<attn::float16, attn::float16>();
  check_shapes<attn::float16, float>();
}

TEST_CASE("small products on the emulator: float operands") { check_shapes<float, float>(); }

TEST_CASE("small products: which products contract.cuh sends to the kernel") {
  using attn::bfloat16;
  CHECK(products::suits<bfloat16>(10, 12, 64));          // attention at a few words, d_k 64
  CHECK(products::suits<bfloat16>(64, 64, 16));          // 2¹⁶ multiply-adds, 4 KiB staged
  CHECK_FALSE(products::suits<bfloat16>(64, 64, 17));    // more multiply-adds
  CHECK_FALSE(products::suits<bfloat16>(4, 4, 1000));    // 16 KiB staged
  CHECK_FALSE(products::suits<float>(32, 64, 32));       // 12 KiB staged in float
  CHECK(products::suits<float>(16, 64, 16));             // 5 KiB
  CHECK_FALSE(products::suits<bfloat16>(0, 4, 4));       // nothing to multiply: contract.cuh returns first
  CHECK_FALSE(products::suits<bfloat16>(8000, 1024, 512));  // a linear layer: cuBLAS
  CHECK(products::staging<bfloat16>(10, 12, 64).block_bytes() <= 48 * 1024);
}

}  // namespace
