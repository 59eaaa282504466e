// Tests of include/attn/text/utf8.hpp: strict UTF-8 validation and where it fails.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <string_view>

#include <attn/text/utf8.hpp>

using attn::text::first_invalid_utf8;
using namespace std::string_view_literals;

TEST_CASE("well-formed UTF-8 of every length is valid") {
  CHECK(first_invalid_utf8("") == std::nullopt);
  CHECK(first_invalid_utf8("plain ASCII, with\ttabs\n") == std::nullopt);
  CHECK(first_invalid_utf8("\0embedded NUL"sv) == std::nullopt);
  CHECK(first_invalid_utf8("caf\xC3\xA9") == std::nullopt);                 // é, 2 bytes
  CHECK(first_invalid_utf8("\xE2\x82\xAC 5") == std::nullopt);              // €, 3 bytes
  CHECK(first_invalid_utf8("\xF0\x9F\x98\x80") == std::nullopt);            // 😀, 4 bytes
  CHECK(first_invalid_utf8("\xC2\x80\xDF\xBF") == std::nullopt);            // U+0080, U+07FF
  CHECK(first_invalid_utf8("\xE0\xA0\x80\xEF\xBF\xBF") == std::nullopt);    // U+0800, U+FFFF
  CHECK(first_invalid_utf8("\xED\x9F\xBF\xEE\x80\x80") == std::nullopt);    // U+D7FF, U+E000
  CHECK(first_invalid_utf8("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF") == std::nullopt);  // U+10000, U+10FFFF
  CHECK(first_invalid_utf8("\xEF\xBB\xBFwith a BOM") == std::nullopt);
}

TEST_CASE("overlong forms are rejected") {
  CHECK(first_invalid_utf8("\xC0\xAF") == 0u);              // '/' in two bytes
  CHECK(first_invalid_utf8("ab\xC1\xBF") == 2u);
  CHECK(first_invalid_utf8("\xE0\x80\xAF") == 0u);          // '/' in three bytes
  CHECK(first_invalid_utf8("\xE0\x9F\xBF") == 0u);          // U+07FF in three bytes
  CHECK(first_invalid_utf8("x\xF0\x80\x80\xAF") == 1u);     // '/' in four bytes
  CHECK(first_invalid_utf8("\xF0\x8F\xBF\xBF") == 0u);      // U+FFFF in four bytes
}

TEST_CASE("surrogates and code points above U+10FFFF are rejected") {
  CHECK(first_invalid_utf8("\xED\xA0\x80") == 0u);          // U+D800
  CHECK(first_invalid_utf8("ok \xED\xBF\xBF") == 3u);       // U+DFFF
  CHECK(first_invalid_utf8("\xF4\x90\x80\x80") == 0u);      // U+110000
  CHECK(first_invalid_utf8("\xF5\x80\x80\x80") == 0u);
  CHECK(first_invalid_utf8("\xFF") == 0u);
  CHECK(first_invalid_utf8("\xFE\xFF") == 0u);
}

TEST_CASE("stray continuation bytes and truncated sequences are rejected") {
  CHECK(first_invalid_utf8("\x80") == 0u);
  CHECK(first_invalid_utf8("caf\xC3\xA9\xA9") == 5u);       // one continuation too many
  CHECK(first_invalid_utf8("end \xC3") == 4u);              // cut short by the end
  CHECK(first_invalid_utf8("\xE2\x82") == 0u);
  CHECK(first_invalid_utf8("\xF0\x9F\x98") == 0u);
  CHECK(first_invalid_utf8("\xE2\x82 x") == 0u);            // cut short by an ASCII byte
  CHECK(first_invalid_utf8("\xF0\x9F\x98\x80\xF0\x9F\x98") == 4u);
}

TEST_CASE("the offset is that of the first bad sequence, after valid multi-byte text") {
  const std::string text = "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xC0\xAF \xFF";
  CHECK(first_invalid_utf8(text) == 10u);
  static_assert(first_invalid_utf8("a\xC0\xAF") == 1u, "usable in constant expressions");
}
