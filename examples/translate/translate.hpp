// attn-translate's work for one compiled model: load the weights, translate the input in
// batches of sentences of about equal length, write, score, draw attention.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
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

/// The input as subword ids, and how many of its lines were cut.
struct encoded_input {
  std::vector<std::vector<token>> sentences;
  std::size_t lines_cut = 0;
};

/// Input lines as subword ids, each cut to --max-input-length subwords (0: no limit), as
/// CTranslate2 cuts its input: one line of tens of thousands of subwords (a text without line
/// breaks) would take minutes of attention, quadratic in its length, before the first progress
/// line, and translate badly after that. A model with learned positions has a table of fixed
/// length, which cuts as well (and with no limit, a longer line is an error). A warning names the
/// lines cut. --score's sources are not cut: a cut source would be scored as another sentence, so
/// a longer one is an error.
inline encoded_input encode_lines(const job& j, index_t max_positions) {
  encoded_input input{std::vector<std::vector<token>>(j.lines.size())};
  const std::size_t held = std::size_t(max_positions - 1);  // learned positions' table, the end symbol aside
  const std::size_t limit = std::size_t(j.opts.max_input_length);
  const bool by_positions = limit == 0 || held < limit;
  const std::size_t cut_to = by_positions ? held : limit;
  const std::string bound = by_positions ? "the model's learned positions hold " + std::to_string(held) +
                                               " and the end symbol"
                                         : "--max-input-length " + std::to_string(limit);
  std::string named;  // the first few lines cut, for the warning
  for (std::size_t i = 0; i < j.lines.size(); ++i) {
    auto& sentence = input.sentences[i];
    sentence = j.vocabulary.encode(j.lines[i]);
    if (sentence.size() <= cut_to) continue;
    const std::string where = input_name(j.opts) + ":" + std::to_string(i + 1) + ": " +
                              std::to_string(sentence.size()) + " subwords; ";
    if (limit == 0) throw std::runtime_error(where + bound);
    if (!j.targets.empty())
      throw std::runtime_error(where + bound + ", and a source cut short cannot be scored" +
                               (by_positions ? "" : " (--max-input-length 0 reads it whole)"));
    if (++input.lines_cut <= 5)
      named += (named.empty() ? "" : ", ") + std::string("line ") + std::to_string(i + 1) + " (" +
               std::to_string(sentence.size()) + " subwords)";
    sentence.resize(cut_to);
  }
  if (input.lines_cut > 0)
    std::fprintf(stderr, "attn-translate: warning: %s: %zu line%s cut to %zu subwords (%s): %s%s%s\n",
                 input_name(j.opts).c_str(), input.lines_cut, input.lines_cut == 1 ? "" : "s", cut_to, bound.c_str(),
                 named.c_str(), input.lines_cut > 5 ? ", ..." : "",
                 by_positions ? "" : "; --max-input-length 0 translates them whole");
  return input;
}

/// --score's sentences as subword ids: their text encoded, or with --pieces their pieces looked
/// up. A piece the vocabulary lacks, a control symbol, or a sentence longer than learned
/// positions reach is an error that names its line.
inline std::vector<std::vector<token>> encode_targets(const job& j, index_t max_positions) {
  const std::string file = j.opts.targets.string();
  std::vector<std::vector<token>> targets(j.targets.size());
  for (std::size_t i = 0; i < j.targets.size(); ++i) {
    const std::string where = file + ":" + std::to_string(i + 1) + ": ";
    if (!j.opts.pieces) {
      targets[i] = j.vocabulary.encode(j.targets[i]);
    } else {
      std::istringstream words(j.targets[i]);
      for (std::string piece; words >> piece;) {
        const auto id = j.vocabulary.id_of(piece);
        if (!id) throw std::runtime_error(where + "the piece '" + piece + "' is not in the vocabulary");
        if (*id == text::subword_model::pad_id || *id == text::subword_model::bos_id ||
            *id == text::subword_model::eos_id)
          throw std::runtime_error(where + "'" + piece + "' is a control symbol, which no translation holds");
        targets[i].push_back(*id);
      }
    }
    if (index_t(targets[i].size()) + 1 > max_positions)
      throw std::runtime_error(where + std::to_string(targets[i].size()) +
                               " subwords; the model's learned positions hold the start symbol and " +
                               std::to_string(max_positions - 1));
  }
  return targets;
}

/// The order lines are decoded in: windows of `window` lines (0: one window), in input order,
/// each sorted into batches of about equal length, so little is padding; longest first, so the
/// progress line's estimate errs on the long side. A window done, its lines are written, as
/// Marian's maxi-batches are: little is lost when decoding stops, and a pipe reads as it goes.
inline std::vector<std::size_t> decoding_order(const std::vector<std::vector<token>>& sources, std::size_t window) {
  std::vector<std::size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  if (window == 0) window = std::max<std::size_t>(order.size(), 1);
  for (auto first = order.begin(); first != order.end();) {
    const auto last = first + std::ptrdiff_t(std::min<std::size_t>(window, std::size_t(order.end() - first)));
    std::stable_sort(first, last, [&](std::size_t a, std::size_t b) { return sources[a].size() > sources[b].size(); });
    first = last;
  }
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
  const auto input = detail::encode_lines(j, max_positions);
  const auto& sources = input.sentences;
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
  const auto order = detail::decoding_order(sources, std::size_t(o.window) * batch_size);
  std::vector<std::vector<decode::hypothesis>> results(sources.size());
  translation_writer output(j, results);
  progress_line progress(sources.size(), o.quiet, targets.empty() ? "translated" : "scored");
  std::size_t first = 0;
  try {
    // A stop signal (examples/stop_signals.hpp) is heeded between batches.
    for (; first < order.size() && examples::stop_signal().load() == 0; first += batch_size) {
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
        for (std::size_t i = first; i < last; ++i) given.push_back(targets[order[i]]);
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
      progress.advance(last - first, tokens);
    }
  } catch (const std::exception& e) {
    progress.stop();
    throw std::runtime_error(std::string(e.what()) + "\nattn-translate: " + output.keep_partial());
  }
  const int signal = examples::stop_signal().load();
  const char* signal_name = signal == SIGINT ? "SIGINT" : "SIGTERM";
  const char* verb = targets.empty() ? "translated" : "scored";
  if (first < order.size()) {  // stopped by a signal
    progress.stop();
    std::fprintf(stderr, "attn-translate: stopped by %s having %s %zu of %zu lines: %s\n", signal_name, verb, first,
                 order.size(), output.keep_partial().c_str());
    return 128 + signal;
  }
  const double seconds = progress.finish();
  output.commit();
  if (signal != 0) {  // after the last batch: the output is whole, and what comes after it is left
    std::fprintf(stderr, "attn-translate: stopped by %s having %s all %zu lines, before scores and pictures\n",
                 signal_name, verb, order.size());
    return 128 + signal;
  }

  // The text of each best translation: what BLEU, chrF and the samples read.
  std::vector<std::string> best(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) best[i] = j.vocabulary.decode(results[i].front().tokens);

  nlohmann::json scores = {
      {"model", j.model_name},
      {"search", o.greedy ? "greedy" : "beam"},
      {"beam", search.beam},
      {"alpha", search.alpha},
      {"sentences", sources.size()},
      {"input_lines_cut", input.lines_cut},  // to --max-input-length or learned positions' table
      {"output_tokens", progress.tokens()},
      {"seconds", seconds},
      {"sentences_per_second", double(sources.size()) / seconds},
      {"tokens_per_second", double(progress.tokens()) / seconds},
      {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
  };
  // The log-probability of what was written (the best translations, or --score's sentences):
  // exp(-log P / tokens) is --score's perplexity, what attn-train reports on validation data.
  double log_prob = 0;
  for (const auto& r : results) log_prob += r.front().log_prob;
  const double per_token = log_prob / double(std::max<std::size_t>(progress.tokens(), 1));
  scores["log_prob"] = log_prob;
  scores["log_prob_per_token"] = per_token;
  if (!targets.empty()) {
    scores["search"] = "none (--score)";
    scores["beam"] = nullptr;
    scores["perplexity"] = std::exp(-per_token);
    std::fprintf(stderr, "scored %zu sentences, %zu subwords with their end symbols: log-probability %.4f, %.4f a "
                 "subword, perplexity %.4f\n", sources.size(), progress.tokens(), log_prob, per_token,
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
  if (o.samples > 0) print_samples(j, best);
  if (!o.scores.empty()) write_json_atomically(o.scores, scores);

  if (!o.attention_dir.empty()) {
    std::filesystem::create_directories(o.attention_dir);
    std::size_t drawn = 0;
    for (int line : o.attention_lines) {
      // Each line's pictures take a pass of the model: a stop is heeded between them.
      if (const int stop = examples::stop_signal().load(); stop != 0) {
        std::fprintf(stderr, "attn-translate: stopped by %s having drawn the pictures of %zu of %zu line(s) in %s\n",
                     stop == SIGINT ? "SIGINT" : "SIGTERM", drawn, o.attention_lines.size(), o.attention_dir.c_str());
        return 128 + stop;
      }
      const std::size_t i = std::size_t(line - 1);
      detail::draw_attention(j, model, sources[i], results[i].front().tokens, line);
      ++drawn;
    }
    std::fprintf(stderr, "attention pictures of %zu line(s) in %s\n", o.attention_lines.size(),
                 o.attention_dir.c_str());
  }
  return 0;
}

}  // namespace attn::translator
