// Tests of include/attn/text/subword.hpp: training, loading, encoding and decoding subwords.
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <attn/text/subword.hpp>

using attn::test::scratch_dir;

namespace {

namespace fs = std::filesystem;
using attn::text::subword_error;
using attn::text::subword_model;


/// Sentences of lower-case words joined by single spaces: text SentencePiece's normaliser
/// leaves as it is, so decode(encode(s)) == s exactly.
std::vector<std::string> sentences(const std::vector<std::string>& words, int count, unsigned salt) {
  std::vector<std::string> lines;
  unsigned state = salt;
  for (int i = 0; i < count; ++i) {
    std::string line;
    const int length = 3 + i % 9;
    for (int w = 0; w < length; ++w) {
      state = state * 1103515245u + 12345u;
      line += (w > 0 ? " " : "") + words[(state >> 16) % words.size()];
    }
    lines.push_back(line + (i % 4 == 0 ? "." : ""));
  }
  return lines;
}

const std::vector<std::string> english = {"the", "cat", "sat", "on", "mat", "dog", "ran", "to",
                                          "a", "house", "with", "red", "door", "and", "big", "tree"};
const std::vector<std::string> spanish = {"el", "gato", "se", "sienta", "en", "la", "alfombra", "perro",
                                          "corre", "una", "casa", "con", "puerta", "roja", "y", "ni\xC3\xB1o"};

void write_lines(const fs::path& file, const std::vector<std::string>& lines, const char* end = "\n",
                 bool bom = false) {
  std::ofstream out(file, std::ios::binary);
  if (bom) out << "\xEF\xBB\xBF";
  for (const auto& line : lines) out << line << end;
}

}  // namespace

TEST_CASE("a trained model has the fixed special ids and round-trips its text") {
  scratch_dir dir("roundtrip");
  const auto corpus = sentences(english, 300, 1);
  write_lines(dir.path / "train.en", corpus);
  const auto model = subword_model::train({dir.path / "train.en"}, dir.path / "bpe", 60);

  CHECK(fs::exists(dir.path / "bpe.model"));
  CHECK(fs::exists(dir.path / "bpe.vocab"));
  CHECK(model.size() > 4);
  CHECK(model.size() <= 60);
  CHECK(model.piece(subword_model::pad_id) == "<pad>");
  CHECK(model.piece(subword_model::unk_id) == "<unk>");
  CHECK(model.piece(subword_model::bos_id) == "<s>");
  CHECK(model.piece(subword_model::eos_id) == "</s>");
  static_assert(subword_model::pad_id == 0 && subword_model::unk_id == 1 && subword_model::bos_id == 2 &&
                subword_model::eos_id == 3);

  for (int i = 0; i < 20; ++i) {
    const std::string& text = corpus[static_cast<std::size_t>(i) * 13];
    const auto ids = model.encode(text);
    REQUIRE(!ids.empty());
    for (const auto id : ids) {
      CHECK(id > subword_model::eos_id);  // no pad, unk, bos or eos
      CHECK(id < model.size());
    }
    CHECK(model.decode(ids) == text);
  }
  // Every piece maps back to its id; a piece the vocabulary lacks has none.
  for (int id = 0; id < model.size(); ++id) CHECK(model.id_of(model.piece(id)) == id);
  CHECK_FALSE(model.id_of("no-such-piece").has_value());
  CHECK_FALSE(model.id_of("").has_value());
  // Subwords compose words the corpus never had.
  const std::string unseen = "a red cat and the tree ran to the big dog house";
  CHECK(model.decode(model.encode(unseen)) == unseen);
  CHECK(model.encode("").empty());
  CHECK(model.decode(std::vector<std::int32_t>{}).empty());
}

TEST_CASE("decode drops pad, bos and eos; bad ids are refused") {
  scratch_dir dir("decode");
  write_lines(dir.path / "train.en", sentences(english, 200, 2));
  const auto model = subword_model::train({dir.path / "train.en"}, dir.path / "bpe", 60);
  const std::string text = "the dog sat on the mat";
  auto ids = model.encode(text);
  ids.insert(ids.begin(), subword_model::bos_id);
  ids.push_back(subword_model::eos_id);
  ids.push_back(subword_model::pad_id);
  ids.push_back(subword_model::pad_id);
  CHECK(model.decode(ids) == text);

  const std::vector<std::int32_t> outside = {model.size()};
  CHECK_THROWS_AS(model.decode(outside), subword_error);
  CHECK_THROWS_AS(model.piece(-1), subword_error);
  CHECK_THROWS_WITH_AS(model.piece(model.size()),
                       ("subword model '" + (dir.path / "bpe.model").string() + "': id " +
                        std::to_string(model.size()) + " is outside its vocabulary of " +
                        std::to_string(model.size()) + " pieces")
                           .c_str(),
                       subword_error);
}

TEST_CASE("one vocabulary is shared by several files; odd file names and CRLF work") {
  scratch_dir dir("shared");
  const fs::path source = dir.path / "corpus, part 1.en";  // a comma and a space: no flag parsing
  const fs::path target = dir.path / "corpus, part 1.es";
  write_lines(source, sentences(english, 200, 3));
  write_lines(target, sentences(spanish, 200, 4), "\r\n", /*bom=*/true);
  const auto model = subword_model::train({source, target}, dir.path / "shared model", 80, 2);
  CHECK(fs::exists(dir.path / "shared model.model"));

  for (int id = 0; id < model.size(); ++id) {
    CHECK(model.piece(id).find('\r') == std::string_view::npos);
    CHECK(model.piece(id).find("\xEF\xBB\xBF") == std::string_view::npos);
  }
  for (const std::string text : {"the cat sat on the mat", "el ni\xC3\xB1o corre a la casa con la puerta roja"}) {
    const auto ids = model.encode(text);
    for (const auto id : ids) CHECK(id != subword_model::unk_id);
    CHECK(model.decode(ids) == text);
  }
}

TEST_CASE("the same input gives the same model") {
  scratch_dir dir("deterministic");
  write_lines(dir.path / "a.txt", sentences(english, 300, 5));
  write_lines(dir.path / "b.txt", sentences(spanish, 300, 6));
  const std::vector<fs::path> files = {dir.path / "a.txt", dir.path / "b.txt"};

  const auto first = subword_model::train(files, dir.path / "m", 70);
  const std::string first_model = attn::test::file_contents(dir.path / "m.model");
  const std::string first_vocab = attn::test::file_contents(dir.path / "m.vocab");
  const auto second = subword_model::train(files, dir.path / "m", 70);
  CHECK(attn::test::file_contents(dir.path / "m.model") == first_model);
  CHECK(attn::test::file_contents(dir.path / "m.vocab") == first_vocab);

  // Elsewhere (the prefix is recorded in the .model): the same pieces and encodings.
  const auto third = subword_model::train(files, dir.path / "n", 70);
  CHECK(attn::test::file_contents(dir.path / "n.vocab") == first_vocab);
  REQUIRE(third.size() == first.size());
  for (int id = 0; id < first.size(); ++id) CHECK(third.piece(id) == first.piece(id));
  const std::string text = "the big dog ran to una casa con la puerta roja";
  CHECK(second.encode(text) == first.encode(text));
  CHECK(third.encode(text) == first.encode(text));
}

TEST_CASE("load reads a trained model back") {
  scratch_dir dir("load");
  write_lines(dir.path / "train.txt", sentences(english, 200, 7));
  const auto trained = subword_model::train({dir.path / "train.txt"}, dir.path / "bpe", 50);
  const auto loaded = subword_model::load(dir.path / "bpe.model");
  CHECK(loaded.size() == trained.size());
  CHECK(loaded.file() == dir.path / "bpe.model");
  const std::string text = "the red door with a big tree";
  CHECK(loaded.encode(text) == trained.encode(text));
  const auto copy = loaded;  // copies share the model
  CHECK(copy.decode(loaded.encode(text)) == text);
}

TEST_CASE("errors name the file") {
  scratch_dir dir("errors");
  const fs::path missing = dir.path / "missing.model";
  CHECK_THROWS_WITH_AS(subword_model::load(missing),
                       doctest::Contains(("cannot load subword model '" + missing.string() + "': ").c_str()),
                       subword_error);

  const fs::path garbage = dir.path / "garbage.model";
  write_lines(garbage, {"this is not a protocol buffer", "\x01\x02\x03"});
  CHECK_THROWS_WITH_AS(subword_model::load(garbage),
                       doctest::Contains(("cannot load subword model '" + garbage.string() + "': ").c_str()),
                       subword_error);

  const fs::path absent = dir.path / "absent.txt";
  CHECK_THROWS_WITH_AS(subword_model::train({absent}, dir.path / "m", 60),
                       ("cannot open '" + absent.string() + "' for subword training: No such file or directory")
                           .c_str(),
                       subword_error);
  CHECK_THROWS_WITH_AS(subword_model::train({dir.path}, dir.path / "m", 60),
                       ("cannot open '" + dir.path.string() + "' for subword training: Is a directory").c_str(),
                       subword_error);
  CHECK_THROWS_AS(subword_model::train({}, dir.path / "m", 60), subword_error);

  // No text: named, not SentencePiece's internal check.
  const fs::path empty = dir.path / "empty.txt", blank = dir.path / "blank.txt";
  write_lines(empty, {});
  write_lines(blank, {"", "  \t", ""}, "\r\n");
  CHECK_THROWS_WITH_AS(subword_model::train({empty, blank}, dir.path / "m", 60),
                       ("subword training for '" + (dir.path / "m").string() + "': no text in '" + empty.string() +
                        "' and '" + blank.string() + "' (empty, or blank lines only)")
                           .c_str(),
                       subword_error);
  write_lines(blank, {"", " a b", ""});  // one line of text is enough to train on
  CHECK_NOTHROW(subword_model::train({empty, blank}, dir.path / "m", 60));

  // Too many distinct characters for the vocabulary: said in our terms (the size), SentencePiece's
  // reason passed on after it (which names an option of its own, --character_coverage).
  write_lines(dir.path / "letters.txt", {"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789"});
  CHECK_THROWS_WITH_AS(subword_model::train({dir.path / "letters.txt"}, dir.path / "small", 20),
                       doctest::Contains(("subword training for '" + (dir.path / "small").string() +
                                          "' failed: a vocabulary of 20 pieces cannot hold every character of the "
                                          "text; ask for more (SentencePiece: ")
                                             .c_str()),
                       subword_error);
}
