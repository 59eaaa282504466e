// attn-translate: translates text with a model trained by attn-train, by beam search (paper
// §6.1: beam 4, length penalty α 0.6, maximum length input + 50) or greedily; scores the
// output with BLEU and chrF as sacreBLEU does; draws the encoder-decoder attention.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <attn/train/checkpoint.hpp>
#include <attn/train/data.hpp>
#include <attn/train/write_target.hpp>

#include "../common/checks.hpp"
#include "../common/numbers.hpp"
#include "../common/stop_signals.hpp"
#include "../common/variant_names.hpp"
#include "job.hpp"
#include "output.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

namespace fs = std::filesystem;
using namespace attn;
using translator::options;

/// Parses the command line into `o`; returns an exit status when the program should stop.
std::optional<int> parse(int argc, char** argv, options& o) {
  CLI::App app{
      "attn-translate: translates one sentence a line with a model trained by attn-train, by beam search\n"
      "(paper §6.1: beam 4, alpha 0.6, at most input length + 50 tokens) or greedily, and scores it.\n"
      "Example: attn-translate --run runs/bible-en-es --average 5 --input test.en --bleu test.es",
      "attn-translate"};
  app.get_formatter()->column_width(34);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  auto* model = "Model";
  auto* checkpoint = app.add_option("--checkpoint", o.checkpoint, "a checkpoint or averaged weights file")
                         ->check(CLI::ExistingFile)
                         ->group(model);
  auto* run = app.add_option("--run", o.run, "an attn-train --out directory: use its newest checkpoints")
                  ->check(CLI::ExistingDirectory)
                  ->group(model);
  checkpoint->excludes(run);
  app.add_option("--average", o.average, "with --run: average its last K checkpoints on the fly")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000))
      ->needs(run)
      ->group(model);
  app.add_option("--vocab", o.vocabulary, "SentencePiece model (default: vocab.model beside the checkpoint)")
      ->check(CLI::ExistingFile)
      ->group(model);

  auto* io = "Input and output";
  app.add_option("--input,-i", o.input, "text to translate, one sentence a line (default: standard input)")
      ->check(CLI::ExistingFile)
      ->group(io);
  auto* output = app.add_option("--output,-o", o.output, "translations, a line each (default: standard output)")
                     ->group(io);
  app.add_flag("--resume", o.resume,
               "go on from FILE.partial, which a run stopped while writing --output FILE kept:\n"
               "its lines are the first input lines' translations, and the rest follow them")
      ->needs(output)
      ->group(io);
  app.add_option("--bleu", o.references, "reference translations: print BLEU and chrF (sacreBLEU's defaults)")
      ->check(CLI::ExistingFile)
      ->group(io);
  auto* bleu = app.get_option("--bleu");
  app.add_option("--scores", o.scores, "write the scores and speed as JSON to this file")->group(io);
  auto* score = app.add_option("--score", o.targets,
                               "score these translations of the input, a line each, instead of translating:\n"
                               "their log-probabilities, written as --with-scores writes translations")
                    ->check(CLI::ExistingFile)
                    ->excludes(bleu)
                    ->group(io);
  app.add_flag("--with-scores", o.with_scores,
               "write each translation as \"i ||| text ||| score ||| log-prob ||| log-prob per token\":\n"
               "log-prob = log P(subwords, end | input), score = log-prob / ((5 + length) / 6)^alpha,\n"
               "length and per token counting the end symbol")
      ->group(io);
  app.add_flag("--pieces", o.pieces,
               "write the subword pieces of each translation, space-separated, instead of its text;\n"
               "with --score, read the translations to score as such pieces")
      ->group(io);
  app.add_option("--samples", o.samples, "print this many lines beside their references")
      ->check(CLI::Range(0, 1000))
      ->group(io);
  app.add_flag("--quiet,-q", o.quiet, "no progress line")->group(io);

  auto* search = "Search";
  auto* beam =
      app.add_option("--beam", o.beam, "beam size")->capture_default_str()->check(CLI::Range(1, 1000))->group(search);
  auto* greedy = app.add_flag("--greedy", o.greedy, "greedy search instead of beam search")->excludes(beam)->group(search);
  app.add_option("--alpha", o.alpha, "length penalty alpha: scores are log P / ((5 + |Y|) / 6)^alpha")
      ->capture_default_str()
      ->check(examples::finite_number(0.0, false, 10.0))
      ->group(search);
  auto* offset = app.add_option("--max-len-offset", o.max_length_offset, "at most input length + this many tokens")
                     ->capture_default_str()
                     ->check(CLI::Range(0, 100000))
                     ->group(search);
  for (auto* option : {beam, greedy, offset}) score->excludes(option);  // --score searches nothing
  app.add_option("--max-input-length", o.max_input_length,
                 "cut input lines to this many subwords (0: no limit), with a warning naming them;\n"
                 "with --score, a longer source is an error")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30))
      ->group(search);
  app.add_option("--nbest", o.nbest, "write the K best as --with-scores writes translations")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000))
      ->excludes(score)
      ->group(search);
  auto* batch_size = app.add_option("--batch-size", o.batch_size,
                                    "sentences decoded together (1 when standard input is a terminal)")
                         ->capture_default_str()
                         ->check(CLI::Range(1, 100000))
                         ->group(search);
  auto* window = app.add_option("--window", o.window,
                                "read the input a window of this many batches at a time, sort it by length into\n"
                                "batches, and write it once it is done (0: the whole input at once; 1 when\n"
                                "standard input is a terminal)")
                     ->capture_default_str()
                     ->check(CLI::Range(0, 1 << 20))
                     ->group(search);
  app.add_option("--threads", o.threads, "CPU threads (default: all)")->check(CLI::Range(1, 1024))->group(search);
  examples::device_flags device;
  examples::add_device_flags(app, device, search);

  auto* pictures = "Attention pictures (the paper's appendix figures)";
  auto* attention_png = app.add_option("--attention-png", o.attention_dir,
                                       "write PNG heatmaps of the encoder-decoder attention, a file per layer with every head")
                            ->group(pictures);
  app.add_option("--attention-lines", o.attention_lines, "input lines (from 1) to draw")
      ->needs(attention_png)
      ->capture_default_str()
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Range(1, 1 << 30))
      ->group(pictures);
  app.footer(
      "Exit status: 0 done, 1 an error, 2 a bad command line. Stopped by SIGINT or SIGTERM (Ctrl-C: after\n"
      "the batch it is on; a second one stops at once), it ends by that signal (a shell's status 130 or\n"
      "143). Stopped or failing, it keeps the lines translated in order: in FILE.partial for --output FILE\n"
      "(the same command with --resume goes on from there), already written for standard output.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (o.checkpoint.empty() && o.run.empty()) {
    std::fprintf(stderr, "attn-translate: give --checkpoint FILE or --run DIR (see --help)\n");
    return 2;
  }
  if (o.resume && o.input.empty() && isatty(STDIN_FILENO) == 1) {
    std::fprintf(stderr, "attn-translate: --resume skips the input's first lines, which it reads again: not from a "
                 "terminal\n");
    return 2;
  }
  if (o.resume && (o.nbest > 1 || o.with_scores || !o.targets.empty())) {
    std::fprintf(stderr, "attn-translate: --resume goes on from plain translations, a line each: not with %s\n",
                 o.nbest > 1 ? "--nbest" : o.with_scores ? "--with-scores" : "--score");
    return 2;
  }
  if (o.nbest > (o.greedy ? 1 : o.beam)) {
    if (o.greedy)
      std::fprintf(stderr, "attn-translate: --nbest %d exceeds the single greedy translation\n", o.nbest);
    else
      std::fprintf(stderr, "attn-translate: --nbest %d exceeds the beam size, %d\n", o.nbest, o.beam);
    return 2;
  }
  // Typed at a terminal, each line is translated when entered, without a progress line between.
  if (o.input.empty() && isatty(STDIN_FILENO) == 1) {
    if (batch_size->count() == 0) o.batch_size = 1;
    if (window->count() == 0) o.window = 1;
    o.quiet = true;
  }
  std::vector<int> drawn;  // each line once, in the order given
  for (int line : o.attention_lines)
    if (std::find(drawn.begin(), drawn.end(), line) == drawn.end()) drawn.push_back(line);
  o.attention_lines = std::move(drawn);
  if (const std::string refused = examples::apply_device_flags(device, o.device, o.tf32); !refused.empty()) {
    std::fprintf(stderr, "attn-translate: %s\n", refused.c_str());
    return 2;
  }
  return std::nullopt;
}

/// The lines of a file, read and checked as attn-train reads its text
/// (train::detail::read_text_lines: UTF-8, no NUL; '\r' and a byte-order mark dropped).
std::vector<std::string> read_lines(const fs::path& path) { return train::detail::read_text_lines(path); }

/// Refuses an output file that cannot be written now, rather than after the decoding: a
/// directory, or one whose directory is missing or not writable (where the temporary file goes;
/// a device or a pipe is written in place, train::resolve_write_target).
void check_output_directory(const fs::path& path, const std::string& flag) {
  if (path.empty()) return;
  const train::write_target target = train::resolve_write_target(path);
  if (fs::is_directory(target.path))
    throw std::runtime_error(flag + " " + path.string() + ": is a directory, not a file");
  if (target.in_place) return;
  const fs::path directory = target.path.parent_path().empty() ? fs::path(".") : target.path.parent_path();
  if (!fs::is_directory(directory))
    throw std::runtime_error(flag + " " + path.string() + ": no directory '" + directory.string() + "'");
  if (::access(directory.c_str(), W_OK) != 0)
    throw std::runtime_error(flag + " " + path.string() + ": cannot write in '" + directory.string() + "' (" +
                             std::strerror(errno) + ")");
}

/// The checkpoints to use: --checkpoint, or the newest --average of --run.
std::vector<fs::path> checkpoints_of(const options& o) {
  if (!o.checkpoint.empty()) return {o.checkpoint};
  const auto found = train::checkpoint_files(o.run);
  if (found.empty()) throw std::runtime_error("--run: no checkpoint-*.safetensors in '" + o.run.string() + "'");
  if (int(found.size()) < o.average)
    std::fprintf(stderr, "attn-translate: warning: '%s' holds %zu checkpoints, fewer than --average %d\n",
                 o.run.c_str(), found.size(), o.average);
  return {found.end() - std::min<std::ptrdiff_t>(o.average, std::ptrdiff_t(found.size())), found.end()};
}

int count_of(const train::averaged_weights& w, const std::string& key) {
  const std::string& text = w.metadata(key);
  const std::optional<int> value = examples::whole_number(text);
  if (!value || *value <= 0)
    throw train::safetensors::format_error(w.sources.front(), "metadata '" + key + "' should be a count, not '" + text + "'");
  return *value;
}

int run(options o) {
#if defined(_OPENMP)
  if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
  check_output_directory(o.output, "--output");
  check_output_directory(o.scores, "--scores");
  if (!o.attention_dir.empty()) fs::create_directories(o.attention_dir);
  const auto files = checkpoints_of(o);
  const fs::path vocabulary = o.vocabulary.empty() ? files.front().parent_path() / "vocab.model" : o.vocabulary;
  translator::job j(o, text::subword_model::load(vocabulary));
  j.input.open(o.input);  // a file is read through once here: its lines counted and checked
  for (auto [file, lines] : {std::pair{&o.references, &j.references}, std::pair{&o.targets, &j.targets}}) {
    if (file->empty()) continue;
    *lines = read_lines(*file);
    if (j.input.total() && lines->size() != *j.input.total())  // else when the input ends
      throw std::runtime_error(translator::line_counts_differ(*file, lines->size(), o, *j.input.total()));
  }
  // From here a first Ctrl-C stops after the batch decoding is on, or while the input is
  // awaited, keeping what is done; before (while an input file is counted, say), it ends the
  // program, which has nothing to keep yet.
  examples::take_stop_signals(std::string(isatty(STDERR_FILENO) == 1 ? "\n" : "") +
                              "attn-translate: stopping after this batch, keeping the lines done (again to stop at once)\n");
  if (!o.attention_dir.empty() && j.input.total())  // else when the input ends
    if (const std::string past = translator::lines_past_input(o, *j.input.total()); !past.empty())
      throw std::runtime_error(past);

  j.weights = train::average_checkpoints(files);
  if (!o.quiet) {
    for (const auto& f : files) std::fprintf(stderr, "%s %s\n", files.size() > 1 ? "averaging" : "loading", f.c_str());
  }

  const translator::model_widths widths{count_of(j.weights, "model.d_model"), count_of(j.weights, "model.d_ff"),
                                        count_of(j.weights, "model.heads"), count_of(j.weights, "model.d_k"),
                                        count_of(j.weights, "model.d_v")};
  if (count_of(j.weights, "model.vocab_size") != j.vocabulary.size())
    throw std::runtime_error("the checkpoint's vocabulary has " + j.weights.metadata("model.vocab_size") +
                             " pieces, but '" + vocabulary.string() + "' has " + std::to_string(j.vocabulary.size()));
  if (j.weights.metadata("model.norm") != "post" || j.weights.metadata("model.tied_embeddings") != "true")
    throw std::runtime_error("attn-translate is compiled for post-norm models with tied embeddings");
  j.hyper.layers = count_of(j.weights, "model.layers");
  j.hyper.dropout = 0.0;
  const std::string& positions = j.weights.metadata("model.positions");
  if (positions != "sinusoidal" && positions != "learned" && positions != "none")
    throw train::safetensors::format_error(files.front(), "model.positions is '" + positions + "'");
  j.hyper.positions = positions == "learned" ? nn::positional::learned
                      : positions == "none"  ? nn::positional::none
                                             : nn::positional::sinusoidal;
  // The attention variant the model was trained with (checkpoints before variants: the paper's).
  const auto variant = j.weights.description.find("model.attention");
  j.hyper.attention = variant == j.weights.description.end() ? "scaled" : variant->second;
  if (const auto why = examples::unknown_variant(j.hyper.attention); !why.empty())
    throw std::runtime_error(files.front().string() + " was trained with attention '" + j.hyper.attention +
                             "', which this attn-translate is not compiled for: " + why);

  for (const auto& m : translator::compiled_models()) {
    if (m.widths == widths) {
      j.model_name = m.name;
      return o.device.cuda ? m.translate_cuda(j) : m.translate(j);
    }
  }
  std::string compiled;
  for (const auto& m : translator::compiled_models()) compiled += std::string("\n  ") + m.name + " " + m.widths.to_string();
  throw std::runtime_error("the checkpoint's widths " + widths.to_string() +
                           " are not compiled into attn-translate; compiled:" + compiled);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (const auto status = parse(argc, argv, o)) return *status;
  std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit makes a write fail (and be reported), not kill us
  try {
    return attn::examples::finish(run(std::move(o)));  // stopped by a signal: ends by it
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-translate: %s\n", e.what());
    return 1;
  }
}
