// attn-translate's work for one compiled model: load the weights, translate the input in
// batches of sentences of about equal length, write, score, draw attention.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <attn/core.hpp>
#include <attn/decode.hpp>
#include <attn/nn.hpp>
#include <attn/train/average.hpp>
#include <attn/text/bleu.hpp>
#include <attn/text/chrf.hpp>
#include <nlohmann/json.hpp>

#include "../common/stop_signals.hpp"
#include "../common/variants.hpp"
#include "heatmap.hpp"
#include "job.hpp"
#include "output.hpp"

namespace attn::translator {

namespace detail {

using token = decode::token;

/// Input lines cut short (encode_lines), for one warning once the input is read.
struct cut_lines {
  std::size_t count = 0;
  std::string named;  // the first few
  std::size_t cut_to = 0;
  std::string bound;  // what cut them
  bool by_positions = false;

  void warn(const job& j) const {
    if (count == 0) return;
    std::fprintf(stderr, "attn-translate: warning: %s: %zu line%s cut to %zu subwords (%s): %s%s%s\n",
                 input_name(j.opts).c_str(), count, count == 1 ? "" : "s", cut_to, bound.c_str(), named.c_str(),
                 count > 5 ? ", ..." : "", by_positions ? "" : "; --max-input-length 0 translates them whole");
  }
};

/// Input lines (the first of them line `first` of the input, from 0) as subword ids, each cut to
/// --max-input-length subwords (0: no limit), as CTranslate2 cuts its input: one line of tens of
/// thousands of subwords (a text without line breaks) would take minutes of attention, quadratic
/// in its length, before the first progress line, and translate badly after that. A model with
/// learned positions has a table of fixed length, which cuts as well (and with no limit, a longer
/// line is an error). `cuts` gathers the lines cut, for a warning that names them. --score's
/// sources are not cut: a cut source would be scored as another sentence, so a longer one is an
/// error.
inline std::vector<std::vector<token>> encode_lines(const job& j, std::span<const std::string> lines,
                                                    std::size_t first, index_t max_positions, cut_lines& cuts) {
  std::vector<std::vector<token>> sentences(lines.size());
  const std::size_t held = std::size_t(max_positions - 1);  // learned positions' table, the end symbol aside
  const std::size_t limit = std::size_t(j.opts.max_input_length);
  cuts.by_positions = limit == 0 || held < limit;
  cuts.cut_to = cuts.by_positions ? held : limit;
  cuts.bound = cuts.by_positions
                   ? "the model's learned positions hold " + std::to_string(held) + " and the end symbol"
                   : "--max-input-length " + std::to_string(limit);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto& sentence = sentences[i];
    sentence = j.vocabulary.encode(lines[i]);
    if (sentence.size() <= cuts.cut_to) continue;
    const std::size_t line = first + i + 1;
    const std::string where =
        input_name(j.opts) + ":" + std::to_string(line) + ": " + std::to_string(sentence.size()) + " subwords; ";
    if (limit == 0) throw std::runtime_error(where + cuts.bound);
    if (!j.targets.empty())
      throw std::runtime_error(where + cuts.bound + ", and a source cut short cannot be scored" +
                               (cuts.by_positions ? "" : " (--max-input-length 0 reads it whole)"));
    if (++cuts.count <= 5)
      cuts.named += (cuts.named.empty() ? "" : ", ") + std::string("line ") + std::to_string(line) + " (" +
                    std::to_string(sentence.size()) + " subwords)";
    sentence.resize(cuts.cut_to);
  }
  return sentences;
}

/// The subword ids of a line of space-separated pieces (--pieces' text), `where` ("FILE:LINE: ")
/// naming it: a piece the vocabulary lacks, or a control symbol, which no translation holds, is
/// an error.
inline std::vector<token> ids_of_pieces(const job& j, const std::string& pieces, const std::string& where) {
  std::vector<token> ids;
  std::istringstream words(pieces);
  for (std::string piece; words >> piece;) {
    const auto id = j.vocabulary.id_of(piece);
    if (!id) throw std::runtime_error(where + "the piece '" + piece + "' is not in the vocabulary");
    if (*id == text::subword_model::pad_id || *id == text::subword_model::bos_id ||
        *id == text::subword_model::eos_id)
      throw std::runtime_error(where + "'" + piece + "' is a control symbol, which no translation holds");
    ids.push_back(*id);
  }
  return ids;
}

/// --score's sentences as subword ids: their text encoded, or with --pieces their pieces looked
/// up (ids_of_pieces). A sentence longer than learned positions reach is an error that names its
/// line too.
inline std::vector<std::vector<token>> encode_targets(const job& j, index_t max_positions) {
  const std::string file = j.opts.targets.string();
  std::vector<std::vector<token>> targets(j.targets.size());
  for (std::size_t i = 0; i < j.targets.size(); ++i) {
    const std::string where = file + ":" + std::to_string(i + 1) + ": ";
    targets[i] = j.opts.pieces ? ids_of_pieces(j, j.targets[i], where) : j.vocabulary.encode(j.targets[i]);
    if (index_t(targets[i].size()) + 1 > max_positions)
      throw std::runtime_error(where + std::to_string(targets[i].size()) +
                               " subwords; the model's learned positions hold the start symbol and " +
                               std::to_string(max_positions - 1));
  }
  return targets;
}

/// The name of a stop signal, for messages.
inline const char* stop_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

/// The order a window's lines are decoded in: sorted into batches of about equal length, so
/// little is padding; longest first, so the progress line's estimate errs on the long side. A
/// window done, its lines are written, as Marian's maxi-batches are: little is lost when decoding
/// stops, and a pipe reads as it goes.
inline std::vector<std::size_t> decoding_order(const std::vector<std::vector<token>>& sources) {
  std::vector<std::size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return sources[a].size() > sources[b].size(); });
  return order;
}

/// Pictures of the encoder-decoder attention of every layer while the model reads its own
/// translation of line `line` (1-based): DIR/line-N-layer-L.png, and DIR/line-N.txt naming the
/// pieces of the rows (target) and columns (source).
template <class C, class Device>
void draw_attention(const job& j, const nn::transformer<float, C, Device>& model, const std::vector<token>& source,
                    const std::vector<token>& translation, int line) {
  const auto& dir = j.opts.attention_dir;
  const std::vector<std::vector<token>> one{source};
  const auto ids = to_device<Device>(decode::source_batch(one, model.pad(), text::subword_model::eos_id));
  tensor<nn::token, shape<nn::batch, nn::tgt>> target(1, index_t(translation.size()) + 1);
  target(0, 0) = text::subword_model::bos_id;
  for (std::size_t i = 0; i < translation.size(); ++i) target(0, index_t(i) + 1) = translation[i];

  nn::attention_record record;
  nn::context ctx;
  ctx.attention = &record;
  model.decode(ctx, model.encode(ctx, ids), ids, to_device<Device>(target));

  const auto layers = record.of(nn::attention_kind::encoder_decoder);
  const std::string stem = "line-" + std::to_string(line);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto& w = *layers[l];
    std::vector<weight_grid> heads;
    for (index_t h = 0; h < w.heads; ++h) {
      weight_grid& grid = heads.emplace_back(weight_grid{int(w.queries), int(w.keys), {}});
      for (index_t q = 0; q < w.queries; ++q)
        for (index_t k = 0; k < w.keys; ++k) grid.values.push_back(w.at(0, h, q, k));
    }
    write_heatmap_png(dir / (stem + "-layer-" + std::to_string(l + 1) + ".png"), heads);
  }
  std::ofstream legend(dir / (stem + ".txt"));
  legend << "# Encoder-decoder attention for input line " << line << ", one PNG a layer, heads side by side.\n"
         << "# Rows: the target piece being predicted, top to bottom. Columns: source pieces, left to right.\n"
         << "source:";
  for (token t : source) legend << ' ' << j.vocabulary.piece(t);
  legend << " </s>\ntarget:";
  for (token t : translation) legend << ' ' << j.vocabulary.piece(t);
  legend << " </s>\n";
  if (!legend) throw std::runtime_error((dir / (stem + ".txt")).string() + ": cannot write");
}

}  // namespace detail

/// Translates (or scores) on Device; a backend header (attn/cpu.hpp or attn/cuda/cuda.cuh) is
/// included before this one.
template <class Widths, class Device>
int translate(job& j) {
  using C = examples::with_variants<Widths>;  // the checkpoint's attention, chosen at run time
  using detail::token;
  const auto& o = j.opts;
  const auto start = std::chrono::steady_clock::now();
  nn::transformer<float, C, Device> model(j.vocabulary.size(), 1, text::subword_model::pad_id, j.hyper);
  {
    auto parameters = model.parameters();
    train::load_averaged(j.weights, parameters);
    j.weights = {};  // the model holds them now
  }
  const index_t max_positions =
      j.hyper.positions == nn::positional::learned ? C::max_positions : std::numeric_limits<index_t>::max() / 2;
  const auto targets = detail::encode_targets(j, max_positions);  // --score's, or none

  decode::search_options search;
  search.beam = o.greedy ? 1 : o.beam;
  search.nbest = o.greedy ? 1 : o.nbest;
  search.alpha = o.alpha;
  search.max_length_offset = o.max_length_offset;
  // Learned positions end: the decoder reads the start symbol and at most max_positions - 1 tokens.
  if (j.hyper.positions == nn::positional::learned) search.length_cap = max_positions - 1;
  search.bos = text::subword_model::bos_id;
  search.eos = text::subword_model::eos_id;
  search.pad = text::subword_model::pad_id;
  search.check();

  const std::size_t batch_size = std::size_t(o.batch_size);
  const std::size_t window_lines =
      o.window == 0 ? std::numeric_limits<std::size_t>::max() : std::size_t(o.window) * batch_size;
  const std::optional<std::size_t> total = j.input.total();
  translation_writer output(j, total);
  // What comes after the output, kept as windows go: the best translations' text (BLEU, chrF,
  // samples), the sources of the samples, and the lines whose attention is drawn.
  const bool keep_best = !j.references.empty() || o.samples > 0;
  std::vector<std::string> best;
  // The samples' sources: of a file, the lines print_samples will choose; of a pipe, every line,
  // since which are chosen depends on the count at its end.
  std::map<std::size_t, std::string> sampled_sources;
  std::set<std::size_t> sampled;
  if (o.samples > 0 && total)
    for (const std::size_t line : sample_lines(std::size_t(o.samples), *total)) sampled.insert(line);
  const auto keep_source = [&](std::size_t line, const std::string& text) {  // input line `line`, from 0
    if (o.samples > 0 && (!total || sampled.contains(line))) sampled_sources.emplace(line, text);
  };
  std::vector<std::pair<std::vector<token>, std::vector<token>>> drawn(o.attention_dir.empty() ? 0
                                                                         : o.attention_lines.size());
  double log_prob = 0;
  detail::cut_lines cuts;
  std::size_t lines = 0;    // read, in windows before the one under way
  std::size_t decoded = 0;  // lines decoded, windows before this one's included
  bool stopped = false;     // by a signal, before the input's end
  std::size_t resumed = 0;  // lines whose translations --resume took from FILE.partial
  std::error_code no_partial;
  if (!o.resume && !output.partial().empty() && std::filesystem::exists(output.partial(), no_partial))
    std::fprintf(stderr, "attn-translate: warning: %s, which a stopped run kept, is replaced if this run stops and "
                 "removed when it ends: --resume goes on from it instead\n", output.partial().c_str());
  if (o.resume) {
    // A failure here leaves FILE.partial as it was (the temporary it was copied to is removed).
    const std::optional<std::vector<std::string>> found = output.resume();
    const std::vector<std::string> kept = found.value_or(std::vector<std::string>{});
    if (total && kept.size() > *total)
      throw std::runtime_error("--resume: " + output.partial().string() + " has " + std::to_string(kept.size()) +
                               " lines, more than " + input_name(o) + "'s " + std::to_string(*total));
    for (std::size_t skipped = 0; skipped < kept.size();) {  // the input lines they translate
      const std::vector<std::string> some = j.input.next(std::min(window_lines, kept.size() - skipped));
      if (const int stop = examples::stop_signal().load(); stop != 0) {  // while a pipe was awaited
        std::fprintf(stderr, "attn-translate: stopped by %s before going on: %s is as it was\n",
                     detail::stop_name(stop), output.partial().c_str());
        return 128 + stop;
      }
      if (some.empty())
        throw std::runtime_error("--resume: " + input_name(o) + " ended after " + std::to_string(skipped) +
                                 " lines, before the " + std::to_string(kept.size()) + " that " +
                                 output.partial().string() + " translates");
      for (std::size_t i = 0; i < some.size(); ++i) keep_source(skipped + i, some[i]);
      skipped += some.size();
    }
    if (keep_best)
      for (std::size_t i = 0; i < kept.size(); ++i)
        best.push_back(o.pieces ? j.vocabulary.decode(detail::ids_of_pieces(
                                      j, kept[i], output.partial().string() + ":" + std::to_string(i + 1) + ": "))
                                : kept[i]);
    lines = decoded = resumed = kept.size();
    const std::string partial = output.partial().string();
    const std::string said = !found         ? "no " + partial + ": translating from the first line"
                             : kept.empty() ? partial + " is empty: translating from the first line"
                             : total && kept.size() == *total
                                 ? partial + " holds all " + std::to_string(kept.size()) +
                                       " lines' translations: nothing is left to translate"
                                 : partial + " holds the first " + std::to_string(kept.size()) +
                                       " lines' translations: going on from line " + std::to_string(kept.size() + 1);
    if (!o.quiet || kept.empty()) std::fprintf(stderr, "attn-translate: --resume: %s\n", said.c_str());
  }
  progress_line progress(total ? std::optional<std::size_t>(*total - lines) : std::nullopt, o.quiet,
                         targets.empty() ? "translated" : "scored");
  if (o.input.empty() && isatty(STDIN_FILENO) == 1)
    std::fprintf(stderr, "attn-translate: ready: a sentence a line, each translated when entered (Ctrl-D ends)\n");
  try {
    // A stop signal (examples/stop_signals.hpp) is heeded between batches, and while the input
    // is awaited.
    while (examples::stop_signal().load() == 0) {
      const std::vector<std::string> window = j.input.next(window_lines);
      if (window.empty() || examples::stop_signal().load() != 0) break;  // a stop while they were read: left
      if (!targets.empty() && lines + window.size() > targets.size())
        throw std::runtime_error(input_name(o) + " has more lines than '" + o.targets.string() + "', " +
                                 std::to_string(targets.size()));
      const auto sources = detail::encode_lines(j, window, lines, max_positions, cuts);
      const auto order = detail::decoding_order(sources);
      std::vector<std::vector<decode::hypothesis>> results(sources.size());
      output.start_window(results);
      for (std::size_t first = 0; first < order.size() && examples::stop_signal().load() == 0; first += batch_size) {
        const std::size_t last = std::min(order.size(), first + batch_size);
        std::vector<std::vector<token>> batch;
        std::vector<index_t> lengths;
        for (std::size_t i = first; i < last; ++i) {
          batch.push_back(sources[order[i]]);
          lengths.push_back(index_t(sources[order[i]].size()));
        }
        decode::kv_cache_decoder<float, C, Device> scorer(model, batch, search.eos);
        if (!targets.empty()) {
          std::vector<std::vector<token>> given;
          for (std::size_t i = first; i < last; ++i) given.push_back(targets[lines + order[i]]);
          auto scored = decode::score_targets(scorer, given, search);
          for (std::size_t i = first; i < last; ++i) results[order[i]] = {std::move(scored[i - first])};
        } else if (o.greedy) {
          auto found = decode::greedy_search(scorer, lengths, search);
          for (std::size_t i = first; i < last; ++i) results[order[i]] = {std::move(found[i - first])};
        } else {
          auto found = decode::beam_search(scorer, lengths, search);
          for (std::size_t i = first; i < last; ++i) results[order[i]] = std::move(found[i - first]);
        }
        output.finished(std::span<const std::size_t>(order).subspan(first, last - first));
        std::size_t tokens = 0;
        for (std::size_t i = first; i < last; ++i) tokens += results[order[i]].front().tokens.size() + 1;
        decoded += last - first;
        progress.advance(last - first, tokens);
      }
      if (examples::stop_signal().load() != 0 && decoded < lines + window.size()) {  // within the window
        stopped = true;
        break;
      }
      for (std::size_t i = 0; i < window.size(); ++i) {
        const auto& found = results[i].front();
        log_prob += found.log_prob;
        if (keep_best) best.push_back(j.vocabulary.decode(found.tokens));
        keep_source(lines + i, window[i]);
        for (std::size_t k = 0; k < drawn.size(); ++k)
          if (std::size_t(o.attention_lines[k]) == lines + i + 1) drawn[k] = {sources[i], found.tokens};
      }
      lines += window.size();
    }
    // A file is counted when opened (input_lines::open): one that changed since is not the input
    // that was checked against --bleu's and --score's files.
    if (total && examples::stop_signal().load() == 0 && lines != *total)
      throw std::runtime_error(input_name(o) + " changed while it was read: " + std::to_string(*total) +
                               " lines when opened, " + std::to_string(lines) + " read");
  } catch (const std::exception& e) {
    progress.stop();
    throw std::runtime_error(std::string(e.what()) + "\nattn-translate: " + output.keep_partial());
  }
  cuts.warn(j);
  const int signal = examples::stop_signal().load();
  const char* signal_name = detail::stop_name(signal);
  const char* verb = targets.empty() ? "translated" : "scored";
  // Stopped by a signal before the input's end: within a window (above), or at a window's end,
  // or while the input was awaited (a pipe's or a terminal's).
  if (signal != 0 && !stopped) stopped = total ? lines < *total : !j.input.ended();
  if (stopped) {
    progress.stop();
    const std::string of = total ? " of " + std::to_string(*total) : std::string();
    std::fprintf(stderr, "attn-translate: stopped by %s having %s %zu%s %s: %s\n", signal_name, verb, decoded,
                 of.c_str(), decoded == 1 && !total ? "line" : "lines", output.keep_partial().c_str());
    return 128 + signal;
  }
  const double seconds = progress.finish();
  output.commit();
  // A pipe's lines are counted at its end: --bleu's, --score's and --attention-lines' checks.
  if (!total) {
    for (auto [file, given] : {std::pair{&o.references, &j.references}, std::pair{&o.targets, &j.targets}})
      if (!file->empty() && given->size() != lines)
        throw std::runtime_error(line_counts_differ(*file, given->size(), o, lines));
    if (!o.attention_dir.empty())
      if (const std::string past = lines_past_input(o, lines); !past.empty()) throw std::runtime_error(past);
  }
  if (signal != 0) {  // after the last batch: the output is whole, and what comes after it is left
    std::fprintf(stderr, "attn-translate: stopped by %s having %s all %zu lines, before scores and pictures\n",
                 signal_name, verb, lines);
    return 128 + signal;
  }

  nlohmann::json scores = {
      {"model", j.model_name},
      {"search", o.greedy ? "greedy" : "beam"},
      {"beam", search.beam},
      {"alpha", search.alpha},
      {"sentences", lines},
      {"resumed_sentences", resumed},  // --resume: taken from FILE.partial, not translated (nor counted below)
      {"input_lines_cut", cuts.count},  // to --max-input-length or learned positions' table
      {"output_tokens", progress.tokens()},
      {"seconds", seconds},
      {"sentences_per_second", double(lines - resumed) / seconds},
      {"tokens_per_second", double(progress.tokens()) / seconds},
      {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
  };
  // The log-probability of what was written (the best translations, or --score's sentences;
  // with --resume, of those this run translated): exp(-log P / tokens) is --score's perplexity,
  // what attn-train reports on validation data.
  const double per_token = log_prob / double(std::max<std::size_t>(progress.tokens(), 1));
  scores["log_prob"] = log_prob;
  scores["log_prob_per_token"] = per_token;
  if (!targets.empty()) {
    scores["search"] = "none (--score)";
    scores["beam"] = nullptr;
    scores["perplexity"] = std::exp(-per_token);
    std::fprintf(stderr, "scored %zu sentences, %zu subwords with their end symbols: log-probability %.4f, %.4f a "
                 "subword, perplexity %.4f\n", lines, progress.tokens(), log_prob, per_token,
                 std::exp(-per_token));
  }
  if (!j.references.empty()) {
    const std::vector<std::vector<std::string>> references{j.references};
    const auto bleu = text::corpus_bleu(best, references);
    const auto chrf = text::corpus_chrf(best, references);
    std::fprintf(stderr, "%s\n%s\n", bleu.format().c_str(), chrf.format().c_str());
    scores["bleu"] = bleu.score;
    scores["bleu_line"] = bleu.format();
    scores["brevity_penalty"] = bleu.brevity_penalty;
    scores["length_ratio"] = bleu.ratio;
    scores["precisions"] = bleu.precisions;
    scores["chrf"] = chrf.score;
  }
  if (o.samples > 0) print_samples(j, sampled_sources, best);
  if (!o.scores.empty()) write_json_atomically(o.scores, scores);

  if (!o.attention_dir.empty()) {
    std::filesystem::create_directories(o.attention_dir);
    std::size_t pictures = 0;
    for (std::size_t k = 0; k < drawn.size(); ++k) {
      // Each line's pictures take a pass of the model: a stop is heeded between them.
      if (const int stop = examples::stop_signal().load(); stop != 0) {
        std::fprintf(stderr, "attn-translate: stopped by %s having drawn the pictures of %zu of %zu line(s) in %s\n",
                     detail::stop_name(stop), k, drawn.size(), o.attention_dir.c_str());
        return 128 + stop;
      }
      if (std::size_t(o.attention_lines[k]) <= resumed) {  // its translation came from FILE.partial
        std::fprintf(stderr, "attn-translate: warning: line %d's attention is not drawn: --resume took its "
                     "translation from %s\n", o.attention_lines[k], output.partial().c_str());
        continue;
      }
      detail::draw_attention(j, model, drawn[k].first, drawn[k].second, o.attention_lines[k]);
      ++pictures;
    }
    std::fprintf(stderr, "attention pictures of %zu line(s) in %s\n", pictures, o.attention_dir.c_str());
  }
  return 0;
}

}  // namespace attn::translator
