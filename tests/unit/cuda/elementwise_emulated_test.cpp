// The GPU's elementwise kernel (cuda/attn/cuda/elementwise_kernel.cuh) on the CPU emulator: every
// element computed once and stored once, whole rounds and the partial last one, at sizes around
// the grid's width and its multiples; 16-bit results rounded as they are stored. The plan counts
// its calls a position (the emulator runs one thread at a time, so a plain count is exact), which
// a loop that skipped an element or computed one twice would change.
// Its vector form (elementwise_vectors.cuh) on real plans (leaves, permutes, broadcasts, slices,
// selects, dropout's mask, coordinates): which plans it takes, and for those the same bits as the
// element-at-a-time kernel, nothing stored past the end, every access aligned (the emulator checks).
#include <attn/cuda/emulator.hpp>  // first: the kernel below is compiled for it

#include <attn/cuda/elementwise_kernel.cuh>
#include <attn/cuda/elementwise_vectors.cuh>
#include <attn/expr/ops.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
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

// ---------------------------------------------------------------------------------------
// The vector kernel.

namespace {

namespace backend = attn::cuda_backend;
namespace op = attn::op;

/// The map of a node [sizes] reading an operand through `strides` (index_map.cuh).
template <std::size_t R>
backend::index_map<R> map_of(std::array<index_t, R> sizes, std::array<index_t, R> strides) {
  return backend::index_map<R>::make(sizes, strides);
}

/// n elements of T filled with `value` (std::vector<bool> has no data()), aligned as new aligns.
template <class T>
struct filled {
  std::unique_ptr<T[]> elements;
  filled(index_t n, T value) : elements(new T[std::size_t(n)]) { std::fill_n(elements.get(), n, value); }
  T* data() const { return elements.get(); }
  T& operator[](std::size_t i) const { return elements[i]; }
};

/// n numbers of T, different from one another where T allows, aligned to 16 bytes, with room
/// for a misaligned view one element on.
template <class T>
filled<T> numbers(index_t n, int seed) {
  filled<T> x(n + 16, T{});
  for (std::size_t i = 0; i < std::size_t(n) + 16; ++i)
    x[i] = T(float((i * 37 + std::size_t(seed) * 11) % 97) / 8.0f - 6.0f);
  REQUIRE(reinterpret_cast<std::uintptr_t>(x.data()) % 16 == 0);
  return x;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// `plan` into n elements of T: whether the vector kernel takes it (`expected`), and where it
/// does, its elements bit for bit those of the element-at-a-time kernel, at two grids (runs
/// fewer than a round's and several rounds), nothing stored past the end.
template <class T, class Index = std::uint32_t, class Plan>
void check_runs(const std::string& what, const Plan& plan, index_t n, bool expected) {
  constexpr int v = backend::vector_width<T>;
  const T sentinel = T(-777.0f);
  const filled<T> reference(n + v, sentinel);
  REQUIRE(reinterpret_cast<std::uintptr_t>(reference.data()) % 16 == 0);
  CHECK_MESSAGE(backend::runs_in_vectors(plan, reference.data(), n) == expected,
                what << ": runs_in_vectors should say " << expected);
  if (!expected) return;
  emulator::launch(backend::elementwise_kernel<Plan, T, Index, backend::elementwise_unroll>, dim3(2), dim3(64), 0, plan,
                   reference.data(), static_cast<Index>(n));
  for (const unsigned threads : {32u, 96u}) {
    const filled<T> out(n + v, sentinel);
    emulator::launch(backend::elementwise_vector_kernel<Plan, T, Index, v>, dim3(2), dim3(threads), 0, plan,
                     out.data(), static_cast<Index>(n / v));
    for (index_t i = 0; i < n + v; ++i) {
      const auto at = std::size_t(i);
      if (!same_bits(out[at], reference[at])) {
        FAIL_CHECK(what << ", " << threads << " threads a block: element " << i << " of " << n << " is "
                        << double(float(out[at])) << ", the element-at-a-time kernel's "
                        << double(float(reference[at])));
        return;
      }
    }
  }
}

/// The heads' split, [batch, length, heads, depth] read as [batch, heads, length, depth], and
/// their merge, the other way: depth innermost on both sides.
template <class T>
void heads_permutes() {
  const std::string type = sizeof(T) == 2 ? "16-bit" : sizeof(T) == 4 ? "float" : "double";
  for (const index_t depth : {index_t{8}, index_t{16}, index_t{64}, index_t{12}}) {
    const index_t batch = 3, length = 5, heads = 4, n = batch * length * heads * depth;
    const auto x = numbers<T>(n, 1);
    const backend::leaf_plan<T> leaf{x.data()};
    const bool whole = depth % backend::vector_width<T> == 0;
    const std::string at = type + ", depth " + std::to_string(depth);
    const backend::gather_plan<4, backend::leaf_plan<T>> split{
        leaf, map_of<4>({batch, heads, length, depth}, {length * heads * depth, depth, heads * depth, 1})};
    check_runs<T>("split heads, " + at, split, n, whole);
    const backend::gather_plan<4, backend::leaf_plan<T>> merge{
        leaf, map_of<4>({batch, length, heads, depth}, {heads * length * depth, depth, length * depth, 1})};
    check_runs<T>("merge heads, " + at, merge, n, whole);
    check_runs<T, index_t>("split heads, 64-bit indices, " + at, split, n, whole);
    // The split's values where they should be, not only as the other kernel has them.
    if (whole) {
      std::vector<T> out(static_cast<std::size_t>(n));
      emulator::launch(backend::elementwise_vector_kernel<std::remove_cvref_t<decltype(split)>, T, std::uint32_t,
                                                          backend::vector_width<T>>,
                       dim3(1), dim3(64), 0, split, out.data(), std::uint32_t(n / backend::vector_width<T>));
      bool right = true;
      for (index_t b = 0; b < batch; ++b)
        for (index_t h = 0; h < heads; ++h)
          for (index_t l = 0; l < length; ++l)
            for (index_t d = 0; d < depth; ++d)
              right = right && same_bits(out[std::size_t(((b * heads + h) * length + l) * depth + d)],
                                         x[std::size_t(((b * length + l) * heads + h) * depth + d)]);
      CHECK_MESSAGE(right, "split heads, " << at << ": an element away from its place");
    }
  }
}

template <class T>
void broadcasts_slices_and_the_rest() {
  constexpr int v = backend::vector_width<T>;
  const index_t rows = 37, width = 8 * v, n = rows * width;
  const auto a = numbers<T>(n, 2), b = numbers<T>(n, 3), row = numbers<T>(width, 4), column = numbers<T>(rows, 5);
  const backend::leaf_plan<T> la{a.data()}, lb{b.data()}, lrow{row.data()}, lcolumn{column.data()};
  using leaf = backend::leaf_plan<T>;
  using gather = backend::gather_plan<2, leaf>;

  check_runs<T>("a + b", backend::binary_plan<op::add, leaf, leaf>{la, lb}, n, true);
  check_runs<T>("relu(a)", backend::unary_plan<op::relu, leaf>{la}, n, true);
  // A row repeated down the rows (a bias), a value a row repeated along it.
  const gather bias{lrow, map_of<2>({rows, width}, {0, 1})};
  check_runs<T>("a + a row broadcast", backend::binary_plan<op::add, leaf, gather>{la, bias}, n, true);
  const gather per_row{lcolumn, map_of<2>({rows, width}, {1, 0})};
  check_runs<T>("a · a column broadcast", backend::binary_plan<op::multiply, leaf, gather>{la, per_row}, n, true);
  // A transpose reads its operand a column at a time: elements one by one, though its rows
  // (2v of a's) are whole runs.
  const gather transposed{la, map_of<2>({width, 2 * v}, {1, width})};
  check_runs<T>("a's first 2v rows transposed", transposed, width * 2 * v, false);
  // One node out of runs puts the whole tree out.
  check_runs<T>("a + b misaligned by an element", backend::binary_plan<op::add, leaf, leaf>{la, leaf{b.data() + 1}}, n,
                false);
  // A node of rows and width that do not split into runs.
  const index_t odd = width - 1;
  check_runs<T>("a + b, rows not whole runs", backend::binary_plan<op::add, leaf, leaf>{la, lb}, rows * odd,
                rows * odd % v == 0);
  const gather odd_bias{lrow, map_of<2>({rows, odd}, {0, 1})};
  check_runs<T>("a row broadcast, rows not whole runs", odd_bias, rows * odd, false);
  // Slices of the columns: [rows, width − v] from v on, and from 1 on.
  const auto slice = [&](index_t start, index_t count) {
    return backend::slice_plan<leaf>{la, backend::slice_map{count, width, start,
                                                            attn::cuda_backend::fast_divider(std::uint64_t(count))}};
  };
  check_runs<T>("a[:, v:]", slice(v, width - v), rows * (width - v), true);
  check_runs<T>("a[:, 1 : 1 + v]", slice(1, v), rows * v, false);
  // Select, comparisons (bool lanes), a cast, coordinates and dropout's mask.
  using compare = backend::binary_plan<op::greater, leaf, leaf>;
  using doubled = backend::binary_plan<op::multiply, leaf, backend::constant_plan<attn::accumulate_t<T>>>;
  const backend::select_plan<compare, leaf, doubled> chosen{compare{la, lb}, la,
                                                            doubled{lb, {attn::accumulate_t<T>(2)}}};
  check_runs<T>("a > b ? a : 2b", chosen, n, true);
  check_runs<bool>("a > b", compare{la, lb}, n, true);
  if constexpr (std::is_same_v<T, float>) {  // an integer select, which would compute both branches
    const auto i = numbers<int>(n, 7), j = numbers<int>(n, 8);
    using integers = backend::leaf_plan<int>;
    using int_compare = backend::binary_plan<op::greater, integers, integers>;
    check_runs<int>("i > j ? i : j, integers",
                    backend::select_plan<int_compare, integers, integers>{
                        int_compare{{i.data()}, {j.data()}}, {i.data()}, {j.data()}},
                    n, false);
  }
  check_runs<T>("float(a > b)", backend::unary_plan<op::cast<attn::accumulate_t<T>>, compare>{compare{la, lb}}, n,
                true);
  using C = attn::accumulate_t<T>;
  const backend::dropout_mask_plan<C> mask{attn::dropout_draws<C>{attn::random_stream(9), 123, 0.25, C(1 / 0.75)}};
  check_runs<T>("a · dropout's mask", backend::binary_plan<op::multiply, leaf, backend::dropout_mask_plan<C>>{la, mask},
                n, true);
  if constexpr (!attn::is_float16_storage<T>)  // 16-bit coordinates would round
    check_runs<T>("a + iota", backend::binary_plan<op::add, leaf, backend::iota_plan<C>>{la, {C(3)}}, n, true);
  // Float operands under a 16-bit result: 32-byte runs of the float, 16 of the result.
  if constexpr (attn::is_float16_storage<T>) {
    const auto f = numbers<float>(n, 6);
    check_runs<T>("a + a float", backend::binary_plan<op::add, leaf, backend::leaf_plan<float>>{la, {f.data()}}, n,
                  true);
  }
}

}  // namespace

TEST_CASE("elementwise vector kernel: the heads' permutes, the plans it takes and the same bits as a thread an "
          "element (emulated)") {
  heads_permutes<attn::bfloat16>();
  heads_permutes<float>();
  heads_permutes<double>();
  broadcasts_slices_and_the_rest<attn::bfloat16>();
  broadcasts_slices_and_the_rest<attn::float16>();
  broadcasts_slices_and_the_rest<float>();
  broadcasts_slices_and_the_rest<double>();
}
