// Subword vocabularies (paper §5.1, byte-pair encoding): a SentencePiece BPE model, trained on
// the training text and shared by source and target. Link with -lsentencepiece
// -lsentencepiece_train (pkg-config: sentencepiece).
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace attn::text {

/// A subword model could not be loaded, trained or used; the message names the file.
class subword_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// Appended piece by piece: GCC 12 warns falsely (-Wrestrict, PR 105651) on "'" + s + "'" at -O3.
inline std::string quoted(const std::filesystem::path& file) {
  std::string text = "'";
  text += file.string();
  text += "'";
  return text;
}

/// SentencePiece's reason for a failure, without the trailing space some of them carry.
inline std::string status_text(const sentencepiece::util::Status& status) {
  std::string text = status.ToString();
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

/// Fails early, with the system's reason, rather than deep inside SentencePiece.
inline void check_readable(const std::filesystem::path& file) {
  std::error_code error;
  if (std::FILE* stream = std::fopen(file.c_str(), "rb")) {
    std::fclose(stream);
    std::error_code ignored;  // opening a directory succeeds; reading it would not
    if (std::filesystem::is_directory(file, ignored)) error = std::make_error_code(std::errc::is_a_directory);
  } else {
    error = std::error_code(errno, std::generic_category());
  }
  if (error)
    throw subword_error("cannot open " + quoted(file) + " for subword training: " + error.message());
}

/// The training sentences of several files, one a line, read in file order. SentencePiece
/// reads files named in a comma-separated flag; handing it the lines instead lets file names
/// hold commas and spaces. Strips '\r' and a leading byte-order mark, as read_parallel does.
class file_lines final : public sentencepiece::SentenceIterator {
 public:
  explicit file_lines(const std::vector<std::filesystem::path>& files) : files_(files) { Next(); }

  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

  void Next() override {
    while (!done_) {
      if (stream_.is_open() && std::getline(stream_, line_)) {
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        if (first_line_ && line_.starts_with("\xEF\xBB\xBF")) line_.erase(0, 3);
        first_line_ = false;
        return;
      }
      if (stream_.is_open() && stream_.bad()) {
        fail("cannot read " + quoted(files_[next_file_ - 1]));
        return;
      }
      stream_.close();
      if (next_file_ == files_.size()) {
        done_ = true;
        return;
      }
      const auto& file = files_[next_file_++];
      stream_.clear();
      stream_.open(file, std::ios::binary);
      if (!stream_.is_open()) {
        fail("cannot open " + quoted(file));
        return;
      }
      first_line_ = true;
    }
  }

 private:
  void fail(std::string message) {
    status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, message);
    done_ = true;
  }

  const std::vector<std::filesystem::path>& files_;
  std::size_t next_file_ = 0;
  std::ifstream stream_;
  std::string line_;
  bool first_line_ = false;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

/// Whether a line of `files` holds more than white space: given none, SentencePiece's trainer
/// fails with an internal check ("[!sentences_.empty()]") that names no file.
inline bool any_text(const std::vector<std::filesystem::path>& files) {
  for (file_lines lines(files); !lines.done(); lines.Next())
    if (lines.value().find_first_not_of(" \t\v\f") != std::string::npos) return true;
  return false;
}

}  // namespace detail

/// A loaded SentencePiece model. Copies share the (immutable) model; encoding and decoding
/// may run on several threads at once.
class subword_model {
 public:
  /// Fixed ids of the special pieces, the same in every model `train` writes.
  static constexpr std::int32_t pad_id = 0, unk_id = 1, bos_id = 2, eos_id = 3;

  /// Loads a .model file written by `train` (or by spm_train with the same special ids).
  static subword_model load(const std::filesystem::path& model_file) {
    auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->Load(model_file.string());
    if (!status.ok())
      throw subword_error("cannot load subword model " + detail::quoted(model_file) + ": " +
                          detail::status_text(status));
    // The model's users (make_batch, the decoder) rely on these ids.
    if (processor->pad_id() != pad_id || processor->unk_id() != unk_id ||
        processor->bos_id() != bos_id || processor->eos_id() != eos_id)
      throw subword_error("subword model " + detail::quoted(model_file) + " has special ids pad=" +
                          std::to_string(processor->pad_id()) + " unk=" +
                          std::to_string(processor->unk_id()) + " bos=" +
                          std::to_string(processor->bos_id()) + " eos=" +
                          std::to_string(processor->eos_id()) + ", expected 0, 1, 2 and 3");
    return subword_model(std::move(processor), model_file);
  }

  /// Trains a BPE model with one vocabulary shared by all `files` (text, one sentence a line),
  /// writes <prefix>.model and <prefix>.vocab and returns the model loaded. At most 2'000'000
  /// sentences, drawn from all of them, are used. The same input gives the same model.
  /// `vocab_size` is an upper bound: a small corpus yields fewer pieces (hard_vocab_limit off),
  /// but it must exceed the number of distinct characters plus the four special pieces.
  static subword_model train(const std::vector<std::filesystem::path>& files,
                             const std::filesystem::path& prefix, int vocab_size, int threads = 1,
                             bool verbose = false) {
    if (files.empty())
      throw subword_error("subword training for " + detail::quoted(prefix) + ": no input files");
    for (const auto& file : files) detail::check_readable(file);
    if (!detail::any_text(files)) {
      std::string names;
      for (const auto& file : files) {
        if (!names.empty()) names += " and ";
        names += detail::quoted(file);
      }
      throw subword_error("subword training for " + detail::quoted(prefix) + ": no text in " + names +
                          " (empty, or blank lines only)");
    }
    // The key-value form, unlike the command-line string, takes a prefix with spaces.
    const std::unordered_map<std::string, std::string> options{
        {"model_prefix", prefix.string()},
        {"model_type", "bpe"},
        {"vocab_size", std::to_string(vocab_size)},
        {"hard_vocab_limit", "false"},
        {"character_coverage", "1.0"},
        {"pad_id", std::to_string(pad_id)},
        {"unk_id", std::to_string(unk_id)},
        {"bos_id", std::to_string(bos_id)},
        {"eos_id", std::to_string(eos_id)},
        {"input_sentence_size", "2000000"},
        {"shuffle_input_sentence", "true"},
        {"num_threads", std::to_string(threads < 1 ? 1 : threads)},
        {"minloglevel", verbose ? "0" : "1"},  // global in SentencePiece: set every time
    };
    // Sampling the input draws from SentencePiece's generator; a fixed seed makes the
    // model a function of the input alone.
    sentencepiece::SetRandomGeneratorSeed(20170612);
    detail::file_lines lines(files);
    const auto status = sentencepiece::SentencePieceTrainer::Train(options, &lines);
    if (!status.ok()) {
      const std::string reason = detail::status_text(status);
      // SentencePiece's words name its own option (--character_coverage); ours is the size.
      if (reason.find("smaller than required_chars") != std::string::npos)
        throw subword_error("subword training for " + detail::quoted(prefix) + " failed: a vocabulary of " +
                            std::to_string(vocab_size) +
                            " pieces cannot hold every character of the text; ask for more (SentencePiece: " +
                            reason + ")");
      throw subword_error("subword training for " + detail::quoted(prefix) + " failed: " + reason);
    }
    return load(std::filesystem::path(prefix.string() + ".model"));
  }

  /// The ids of `text`'s pieces, without bos or eos. SentencePiece normalises the text first
  /// (NFKC, runs of spaces made one, leading and trailing spaces dropped).
  std::vector<std::int32_t> encode(std::string_view text) const {
    std::vector<int> ids;
    const auto status = processor_->Encode(text, &ids);
    if (!status.ok())
      throw subword_error("subword model " + detail::quoted(file_) +
                          " cannot encode: " + detail::status_text(status));
    return {ids.begin(), ids.end()};
  }

  /// The text of `ids`; pad, bos and eos are dropped, unknown pieces read " ⁇ ".
  std::string decode(std::span<const std::int32_t> ids) const {
    std::vector<int> pieces;
    pieces.reserve(ids.size());
    for (const std::int32_t id : ids) {
      check_id(id);
      if (id != pad_id && id != bos_id && id != eos_id) pieces.push_back(id);
    }
    std::string text;
    const auto status = processor_->Decode(pieces, &text);
    if (!status.ok())
      throw subword_error("subword model " + detail::quoted(file_) +
                          " cannot decode: " + detail::status_text(status));
    return text;
  }

  /// The id of a piece ("▁the"), or none when the vocabulary lacks it.
  std::optional<std::int32_t> id_of(std::string_view piece) const {
    const int id = processor_->PieceToId(piece);  // the unknown piece's id for any unknown piece
    if (id == unk_id && piece != processor_->IdToPiece(unk_id)) return std::nullopt;
    return id;
  }

  /// Pieces in the vocabulary, special ones included: ids are 0 .. size() - 1.
  int size() const { return processor_->GetPieceSize(); }

  /// The piece with this id ("▁the", "<unk>"); valid as long as a copy of the model lives.
  std::string_view piece(std::int32_t id) const {
    check_id(id);
    return processor_->IdToPiece(id);
  }

  const std::filesystem::path& file() const noexcept { return file_; }

 private:
  subword_model(std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor,
                std::filesystem::path file)
      : processor_(std::move(processor)), file_(std::move(file)) {}

  void check_id(std::int32_t id) const {
    if (id < 0 || id >= size())
      throw subword_error("subword model " + detail::quoted(file_) + ": id " + std::to_string(id) +
                          " is outside its vocabulary of " + std::to_string(size()) + " pieces");
  }

  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::filesystem::path file_;
};

}  // namespace attn::text
