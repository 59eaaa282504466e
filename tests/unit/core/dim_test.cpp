// Tests of include/attn/core/dim.hpp, shape.hpp and extents.hpp: identities, extents, errors.
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include <attn/attn.hpp>

namespace {
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using d_model = attn::dim<"d_model", 512>;
using heads = attn::dim<"heads", 8>;
}  // namespace

TEST_CASE("a dimension's identity is its name and extent") {
  static_assert(std::is_same_v<batch, attn::dim<"batch">>);
  static_assert(!std::is_same_v<batch, len>);
  static_assert(attn::dimension<d_model> && attn::static_dimension<d_model>);
  static_assert(attn::dynamic_dimension<batch> && !attn::static_dimension<batch>);
  static_assert(!attn::dimension<int>);
  CHECK(d_model::name == "d_model");
  CHECK(d_model::extent == 512);
  CHECK(batch::extent == attn::dynamic_extent);
}

TEST_CASE("shapes count their dynamic dimensions and print readably") {
  using s = attn::shape<batch, len, d_model>;
  static_assert(s::rank == 3 && s::rank_dynamic == 2 && !s::is_static);
  static_assert(attn::shape<d_model, heads>::is_static);
  static_assert(attn::has_dim<s, len> && !attn::has_dim<s, heads>);
  static_assert(attn::dim_index<s, d_model> == 2);
  static_assert(std::is_same_v<attn::remove_dim<s, len>, attn::shape<batch, d_model>>);
  static_assert(std::is_same_v<attn::replace_dim<s, d_model, heads>, attn::shape<batch, len, heads>>);
  CHECK(s::to_string() == "[batch, len, d_model=512]");
}

TEST_CASE("extents hold static sizes and take dynamic ones in order") {
  attn::extents<attn::shape<batch, d_model, len>> e(3, 5);
  CHECK(e.extent<batch>() == 3);
  CHECK(e.extent<d_model>() == 512);
  CHECK(e.extent<len>() == 5);
  CHECK(e.size() == 3 * 512 * 5);
  CHECK(e.stride<batch>() == 512 * 5);
  CHECK(e.stride<d_model>() == 5);
  CHECK(e.stride<len>() == 1);
  CHECK(e.to_string() == "[batch=3, d_model=512, len=5]");
  constexpr attn::extents<attn::shape<d_model, heads>> fixed;
  static_assert(fixed.size() == 512 * 8);
}

TEST_CASE("extents reject sizes that contradict the type") {
  using s = attn::shape<batch, d_model>;
  CHECK_THROWS_AS(attn::extents<s>::from_array({2, 100}), attn::extent_error);
  CHECK_THROWS_AS(attn::extents<s>(-1), attn::extent_error);
  try {
    (void)attn::extents<s>::from_array({2, 100});
    FAIL("no error");
  } catch (const attn::extent_error& e) {
    const std::string message = e.what();
    CHECK(message.find("'d_model'") != std::string::npos);
    CHECK(message.find("512") != std::string::npos);
    CHECK(message.find("100") != std::string::npos);
    CHECK(e.dimension() == "d_model");
  }
}

TEST_CASE("shared dynamic dimensions must agree, and the error names them") {
  attn::extents<attn::shape<batch, len>> a(2, 7);
  attn::extents<attn::shape<len, d_model>> b(7);
  attn::extents<attn::shape<len, d_model>> c(9);
  CHECK_NOTHROW(attn::check_common_extents("test", a, b));
  try {
    attn::check_common_extents("attn::test", a, c);
    FAIL("no error");
  } catch (const attn::extent_error& e) {
    CHECK(std::string(e.what()) ==
          "attn::test: dimension 'len' has extent 7 in one operand and 9 in the other");
    CHECK(e.expected() == 7);
    CHECK(e.actual() == 9);
  }
}

TEST_CASE("gather_extents takes each size from the first source that has it") {
  attn::extents<attn::shape<batch, len>> a(2, 7);
  attn::extents<attn::shape<heads, len>> b(7);
  const auto g = attn::gather_extents<attn::shape<batch, heads, len, d_model>>(a, b);
  CHECK(g.sizes() == std::array<attn::index_t, 4>{2, 8, 7, 512});
}
