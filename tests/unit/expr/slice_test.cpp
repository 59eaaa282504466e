// Tests of include/attn/expr/slice.hpp: windows along a dynamic dimension.
#include <doctest/doctest.h>

#include "../reference.hpp"

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using d_small = attn::dim<"d_small", 3>;
using s3 = attn::shape<batch, len, d_small>;
}  // namespace

TEST_CASE("slices along the first and a middle dimension read the right window") {
  attn::tensor<float, s3> x(4, 9);
  fill_random(x);
  auto rows = attn::eval(attn::slice<batch>(x, 1, 2));
  CHECK(rows.extent<batch>() == 2);
  for_each_index(rows.extents(), [&](const auto& i) { CHECK(at(rows, i) == x(i[0] + 1, i[1], i[2])); });
  auto window = attn::eval(attn::slice<len>(x, 3, 5) * 2.0f);
  CHECK(window.extent<len>() == 5);
  for_each_index(window.extents(), [&](const auto& i) {
    CHECK(at(window, i) == 2.0f * x(i[0], i[1] + 3, i[2]));
  });
  auto empty = attn::eval(attn::slice<len>(x, 9, 0));
  CHECK(empty.size() == 0);
}

TEST_CASE("a slice keeps the dimension's name: mixing sizes is caught at run time") {
  attn::tensor<float, s3> x(2, 6);
  CHECK_THROWS_AS((void)(attn::slice<len>(x, 0, 3) + x), attn::extent_error);
  CHECK_NOTHROW((void)(attn::slice<len>(x, 0, 3) + attn::slice<len>(x, 3, 3)));
  CHECK_THROWS_AS((void)attn::slice<len>(x, 4, 3), attn::extent_error);
  CHECK_THROWS_AS((void)attn::slice<len>(x, -1, 2), attn::extent_error);
}

TEST_CASE("writing a shifted window of a tensor into itself is safe") {
  using n = attn::dim<"n">;
  attn::tensor<float, attn::shape<n>> x(8);
  for (attn::index_t i = 0; i < 8; ++i) x(i) = static_cast<float>(i);
  auto head = attn::slice<n>(x.view(), 0, 7);
  attn::tensor_view<float, attn::shape<n>> tail(x.data() + 1, attn::extents<attn::shape<n>>(7));
  tail = head;  // x[1..8) = x[0..7): overlapping, reordered read
  for (attn::index_t i = 1; i < 8; ++i) CHECK(x(i) == static_cast<float>(i - 1));
}
