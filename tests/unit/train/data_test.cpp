// Tests of include/attn/train/data.hpp: reading parallel text and encoding it into examples.
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <attn/train/data.hpp>

using attn::test::scratch_dir;

namespace {

namespace fs = std::filesystem;
using attn::train::data_error;
using attn::train::filter_report;
using attn::train::parallel_text;
using attn::train::read_parallel;


using lines = std::vector<std::string>;

}  // namespace

TEST_CASE("read_parallel reads line i of each file as a pair") {
  scratch_dir dir("plain");
  const auto text = read_parallel(dir.write("a.en", "one\ntwo\n\nfour\n"), dir.write("a.es", "uno\ndos\n\ncuatro\n"));
  CHECK(text.source == lines{"one", "two", "", "four"});
  CHECK(text.target == lines{"uno", "dos", "", "cuatro"});
}

TEST_CASE("a last line without a newline counts; an empty file has no lines") {
  scratch_dir dir("no-newline");
  const auto text = read_parallel(dir.write("a.en", "one\ntwo"), dir.write("a.es", "uno\ndos\n"));
  CHECK(text.source == lines{"one", "two"});
  CHECK(text.target == lines{"uno", "dos"});

  const auto empty = read_parallel(dir.write("e.en", ""), dir.write("e.es", ""));
  CHECK(empty.source.empty());
  CHECK(empty.target.empty());

  const auto blank = read_parallel(dir.write("b.en", "\n"), dir.write("b.es", "x"));
  CHECK(blank.source == lines{""});
  CHECK(blank.target == lines{"x"});
}

TEST_CASE("CRLF line ends and a byte-order mark are removed") {
  scratch_dir dir("crlf");
  const auto text = read_parallel(dir.write("a.en", "\xEF\xBB\xBFone\r\ntwo\r\n\r\n"),
                                  dir.write("a.es", "\xEF\xBB\xBF" "uno\ndos\r\n\xEF\xBB\xBFtres"));
  CHECK(text.source == lines{"one", "two", ""});
  // Only the first line's mark is one; elsewhere U+FEFF is text.
  CHECK(text.target == lines{"uno", "dos", "\xEF\xBB\xBFtres"});
  // Only one '\r' goes; a lone '\r' inside a line stays.
  const auto inner = read_parallel(dir.write("b.en", "a\rb\r\r\n"), dir.write("b.es", "c\n"));
  CHECK(inner.source == lines{"a\rb\r"});
}

TEST_CASE("lines longer than the read buffer and many lines are read whole") {
  scratch_dir dir("long");
  const std::string long_line(3'000'000, 'x');
  std::string many;
  for (int i = 0; i < 100'000; ++i) many += "line " + std::to_string(i) + "\n";
  const auto text = read_parallel(dir.write("a.en", "short\n" + long_line + "\n\xC3\xA9"),
                                  dir.write("a.es", many.substr(0, many.find("line 3\n"))));
  REQUIRE(text.source.size() == 3);
  CHECK(text.source[1] == long_line);
  CHECK(text.source[2] == "\xC3\xA9");

  const auto big = read_parallel(dir.write("b.en", many), dir.write("b.es", many));
  REQUIRE(big.source.size() == 100'000);
  CHECK(big.source[99'999] == "line 99999");
}

TEST_CASE("read_parallel errors name the file, the line and the problem") {
  scratch_dir dir("errors");
  const fs::path en = dir.write("train.en", "a\nb\nc\n");
  const fs::path es = dir.write("train.es", "a\nb\n");
  const fs::path missing = dir.path / "x.en";

  CHECK_THROWS_WITH_AS(read_parallel(missing, es),
                       ("cannot open '" + missing.string() + "': No such file or directory").c_str(), data_error);
  CHECK_THROWS_WITH_AS(read_parallel(en, missing),
                       ("cannot open '" + missing.string() + "': No such file or directory").c_str(), data_error);
  CHECK_THROWS_WITH_AS(read_parallel(dir.path, es),
                       ("cannot read '" + dir.path.string() + "': Is a directory").c_str(), data_error);
  CHECK_THROWS_WITH_AS(read_parallel(en, es),
                       ("'" + en.string() + "' has 3 lines but '" + es.string() + "' has 2").c_str(), data_error);
  const fs::path one = dir.write("one.es", "a");
  CHECK_THROWS_WITH_AS(read_parallel(one, es),
                       ("'" + one.string() + "' has 1 line but '" + es.string() + "' has 2").c_str(), data_error);

  // Line 3, byte 5 (0-based, counted from the start of the line as stored).
  const fs::path bad = dir.write("bad.es", "ok\n\xC3\xA9 fine\nhello\xC0\xAFworld\nok\n");
  CHECK_THROWS_WITH_AS(read_parallel(dir.write("good.en", "1\n2\n3\n4\n"), bad),
                       (bad.string() + ":3: invalid UTF-8 at byte 5").c_str(), data_error);
  // A truncated sequence at the end of an unterminated last line, and a surrogate.
  const fs::path cut = dir.write("cut.en", "fine\nend\xE2\x82");
  CHECK_THROWS_WITH_AS(read_parallel(cut, es), (cut.string() + ":2: invalid UTF-8 at byte 3").c_str(), data_error);
  const fs::path surrogate = dir.write("surrogate.en", "\xED\xA0\x80\n");
  CHECK_THROWS_WITH_AS(read_parallel(surrogate, es), (surrogate.string() + ":1: invalid UTF-8 at byte 0").c_str(),
                       data_error);
  // A NUL byte is valid UTF-8 but not text; UTF-16 has one beside every ASCII character, and
  // its byte-order mark is invalid UTF-8 that says so.
  const std::string utf16_advice = " (UTF-16 text? convert it to UTF-8: iconv -f UTF-16 -t UTF-8)";
  const fs::path nul = dir.write("nul.en", std::string("fine\nok\nab\0c\n", 12));
  CHECK_THROWS_WITH_AS(read_parallel(nul, dir.write("three.es", "1\n2\n3\n")),
                       (nul.string() + ":3: a NUL byte at byte 2: not text" + utf16_advice).c_str(), data_error);
  const fs::path utf16 = dir.write("utf16.en", std::string("\xFF\xFEh\0i\0\n\0", 8));
  CHECK_THROWS_WITH_AS(read_parallel(utf16, es),
                       (utf16.string() + ":1: invalid UTF-8 at byte 0" + utf16_advice).c_str(), data_error);
  const fs::path latin1 = dir.write("latin1.en", "\xFF\xFFh\n");  // not a byte-order mark: no advice
  CHECK_THROWS_WITH_AS(read_parallel(latin1, es), (latin1.string() + ":1: invalid UTF-8 at byte 0").c_str(),
                       data_error);
}

TEST_CASE("the filter report counts and summarises") {
  filter_report report;
  report.max_tokens = 100;
  report.kept = 1000;
  CHECK(report.summary() == "kept 1000 of 1000 sentence pairs; skipped 0 empty and 0 longer than 100 subwords");
  report.kept = 998;
  report.empty = 1;
  report.too_long = 1;
  report.first_skipped_lines = {3, 17};
  CHECK(report.summary() ==
        "kept 998 of 1000 sentence pairs; skipped 1 empty and 1 longer than 100 subwords (lines 3, 17)");
  report.empty = 6;
  report.first_skipped_lines = {1, 2, 3, 4, 5};
  CHECK(report.summary() ==
        "kept 998 of 1005 sentence pairs; skipped 6 empty and 1 longer than 100 subwords (lines 1, 2, 3, 4, 5, ...)");
}

TEST_CASE("encode_pairs skips empty and overlong pairs and keeps the rest in order") {
  scratch_dir dir("encode");
  std::string corpus;
  for (int i = 0; i < 200; ++i)
    corpus += std::string(i % 2 ? "the cat sat on the mat" : "the dog ran to a house") + (i % 3 ? "\n" : " and back\n");
  const fs::path train = dir.write("train.txt", corpus);
  const auto model = attn::text::subword_model::train({train}, dir.path / "bpe", 40);

  const std::string long_text = "the cat sat on the mat and the dog ran to a house and back to the mat";
  REQUIRE(model.encode(long_text).size() > 10);
  const std::string short_text = "the cat";
  REQUIRE(model.encode(short_text).size() <= 10);

  parallel_text text;
  const auto add = [&](std::string source, std::string target) {
    text.source.push_back(std::move(source));
    text.target.push_back(std::move(target));
  };
  add(short_text, "the dog");        // 1 kept
  add("", "the dog");                // 2 empty source
  add("the mat", " \t ");            // 3 blank target
  add(long_text, short_text);        // 4 source too long
  add(short_text, long_text);        // 5 target too long
  add("a house", "the mat");         // 6 kept
  add("\xE2\x80\x8B", "the cat");    // 7 only a zero-width space: no subwords, empty
  add("  the mat  ", "a cat");       // 8 kept: spaces around words are fine
  add("", long_text);                // 9 empty wins over too long
  add("the", "the");                 // 10 kept
  add(long_text, long_text);         // 11 too long

  filter_report report;
  report.kept = 99;  // overwritten, not added to
  const auto examples = attn::train::encode_pairs(text, model, 10, report);
  CHECK(report.kept == 4);
  CHECK(report.empty == 4);
  CHECK(report.too_long == 3);
  CHECK(report.max_tokens == 10);
  CHECK(report.first_skipped_lines == std::vector<std::size_t>{2, 3, 4, 5, 7});
  CHECK(report.summary() ==
        "kept 4 of 11 sentence pairs; skipped 4 empty and 3 longer than 10 subwords (lines 2, 3, 4, 5, 7, ...)");

  REQUIRE(examples.size() == 4);
  CHECK(examples[0].source == model.encode(short_text));
  CHECK(examples[0].target == model.encode("the dog"));
  CHECK(examples[1].source == model.encode("a house"));
  CHECK(examples[2].source == model.encode("the mat"));
  CHECK(examples[3].target == model.encode("the"));
  for (const auto& example : examples) {
    for (const auto id : example.source) CHECK(id > attn::text::subword_model::eos_id);  // no bos / eos
    for (const auto id : example.target) CHECK(id > attn::text::subword_model::eos_id);
  }

  parallel_text uneven;
  uneven.source = {"a"};
  CHECK_THROWS_AS(attn::train::encode_pairs(uneven, model, 10, report), data_error);
}
