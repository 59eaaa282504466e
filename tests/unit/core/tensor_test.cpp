// Tests of include/attn/core/tensor.hpp: storage, alignment, views, copies.
#include <doctest/doctest.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include <attn/attn.hpp>

namespace {
using batch = attn::dim<"batch">;
using d_model = attn::dim<"d_model", 6>;
using row = attn::shape<batch, d_model>;
}  // namespace

TEST_CASE("tensors are zero-initialised, aligned and row-major") {
  attn::tensor<float, row> t(3);
  CHECK(t.size() == 18);
  CHECK(t.bytes() == 18 * sizeof(float));
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % attn::memory<attn::cpu>::alignment == 0);
  for (attn::index_t i = 0; i < t.size(); ++i) CHECK(t.data()[i] == 0.0f);
  t(2, 5) = 4.0f;
  CHECK(t.data()[2 * 6 + 5] == 4.0f);
  CHECK(t.extent<batch>() == 3);
}

TEST_CASE("static shapes need no sizes; size-0 and size-1 dimensions work") {
  attn::tensor<double, attn::shape<d_model>> v;
  CHECK(v.size() == 6);
  attn::tensor<float, row> empty(0);
  CHECK(empty.size() == 0);
  attn::tensor<float, row> one(1);
  CHECK(one.size() == 6);
}

TEST_CASE("copies are deep, moves transfer, views share") {
  attn::tensor<float, row> a(2);
  a(1, 1) = 3.0f;
  attn::tensor<float, row> b = a;
  b(1, 1) = 5.0f;
  CHECK(a(1, 1) == 3.0f);
  attn::tensor<float, row> c = std::move(b);
  CHECK(c(1, 1) == 5.0f);
  auto v = a.view();
  v(0, 0) = 7.0f;
  CHECK(a(0, 0) == 7.0f);
  static_assert(std::is_same_v<decltype(std::as_const(a).view()),
                               attn::tensor_view<const float, row, attn::cpu>>);
}

TEST_CASE("assigning a view writes through it") {
  attn::tensor<float, row> a(2), b(2);
  for (attn::index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i);
  b.view() = a.view();
  for (attn::index_t i = 0; i < a.size(); ++i) CHECK(b.data()[i] == static_cast<float>(i));
  attn::tensor<float, row> wrong(3);
  CHECK_THROWS_AS(wrong.view() = a.view(), attn::extent_error);
}

TEST_CASE("a tensor can be built from an expression") {
  attn::tensor<float, row> a(4);
  for (attn::index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i);
  attn::tensor<float, row> doubled(a * 2.0f);
  CHECK(doubled(3, 5) == 2.0f * 23);
  auto e = attn::eval(a + a);
  static_assert(std::is_same_v<decltype(e), attn::tensor<float, row, attn::cpu>>);
  CHECK(e(3, 5) == 46.0f);
}

TEST_CASE("core: freed host blocks are reused for requests up to twice smaller, not smaller still") {
  using host = attn::memory<attn::cpu>;
  auto& cache = attn::detail::host_block_cache::instance();
  host::release_cached();
  void* big = host::allocate_uninitialized(1 << 20);
  host::deallocate(big);
  const std::size_t kept = cache.cached_bytes();
  CHECK(kept >= (1 << 20));
  void* smaller = host::allocate_uninitialized(600 << 10);  // fits in the 1 MiB block: taken
  CHECK(smaller == big);
  CHECK(cache.cached_bytes() == 0);
  host::deallocate(smaller);
  CHECK(cache.cached_bytes() == kept);  // it goes back whole
  void* much_smaller = host::allocate_uninitialized(300 << 10);  // under half: a block of its own
  CHECK(much_smaller != big);
  CHECK(cache.cached_bytes() == kept);
  host::deallocate(much_smaller);
  host::release_cached();
  CHECK(cache.cached_bytes() == 0);
}

TEST_CASE("core: a host block holds its request's size class and a header, so powers of two waste nothing") {
  using host = attn::memory<attn::cpu>;
  host::release_cached();
  // [1024, 512] floats, the size of most of a base model's activations: 2 MiB exactly. The
  // header once pushed such a block into the next class, 2.5 MiB (a quarter more memory).
  for (const std::size_t bytes : {std::size_t(2) << 20, std::size_t(1) << 20, std::size_t(5) << 20}) {
    CAPTURE(bytes);
    const std::size_t before = host::used_bytes();
    void* p = host::allocate_uninitialized(bytes);
    CHECK(host::used_bytes() - before == bytes + host::alignment);
    host::deallocate(p);
    CHECK(host::used_bytes() == before);
    host::release_cached();  // else the next request may take this larger block
  }
  // Between classes: at most a quarter more than asked, and the header.
  const std::size_t odd = (std::size_t(2) << 20) + 1000, before = host::used_bytes();
  void* p = host::allocate_uninitialized(odd);
  const std::size_t taken = host::used_bytes() - before;
  CHECK(taken >= odd + host::alignment);
  CHECK(taken <= odd + odd / 4 + host::alignment);
  host::deallocate(p);
  host::release_cached();
}

TEST_CASE("core: view_as shows the same elements under other names, and positional names depend on extents alone") {
  using src = attn::dim<"src">;
  using tgt = attn::dim<"tgt">;
  using source = attn::shape<batch, src, d_model>;
  using target = attn::shape<batch, tgt, d_model>;
  attn::tensor<float, source> a(2, 3);
  for (attn::index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i);

  const auto seen = attn::view_as<target>(a.view());
  static_assert(std::is_same_v<decltype(seen), const attn::tensor_view<float, target, attn::cpu>>);
  CHECK(seen.data() == a.data());
  CHECK(seen.extent<batch>() == 2);
  CHECK(seen.extent<tgt>() == 3);
  seen(1, 2, 5) = -1.0f;  // writes through
  CHECK(a(1, 2, 5) == -1.0f);

  // Shapes that differ in their names alone have one positional form; other extents, another.
  using positional = attn::positional<source>;
  static_assert(std::is_same_v<positional, attn::positional<target>>);
  static_assert(!std::is_same_v<positional, attn::positional<attn::shape<batch, src, attn::dim<"d_ff", 7>>>>);
  static_assert(!std::is_same_v<positional, attn::positional<attn::shape<batch, attn::dim<"len", 3>, d_model>>>);
  static_assert(attn::dim_at<positional, 0>::name == "#00" && attn::dim_at<positional, 2>::name == "#02");
  static_assert(attn::dim_at<positional, 2>::extent == 6 && !attn::dim_at<positional, 1>::is_static);
  // Positions in a list of several shapes' dimensions: a product's operands share the names of
  // the dimensions they share.
  using all = attn::meta::list<batch, src, d_model, tgt>;
  static_assert(std::is_same_v<attn::positional_dim<tgt, all>, attn::dim<"#03">>);
  static_assert(std::is_same_v<attn::positional_shape<attn::shape<tgt, batch>, all>,
                               attn::shape<attn::dim<"#03">, attn::dim<"#00">>>);

  const auto back = attn::view_as<source>(attn::view_as<positional>(std::as_const(a).view()));
  CHECK(back.extents() == a.extents());
  CHECK(back.data() == a.data());
}
