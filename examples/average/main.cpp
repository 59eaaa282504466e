// attn-average: the mean of the weights of the last k checkpoints of a run (paper §6.1: "we
// used a single model obtained by averaging the last 5 checkpoints").
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <attn/train/checkpoint.hpp>
#include <attn/train/safetensors.hpp>

namespace {

namespace fs = std::filesystem;
namespace st = attn::train::safetensors;

/// The metadata that says which model a file belongs to: every "model.*" key.
std::map<std::string, std::string> model_description(const st::file& file) {
  std::map<std::string, std::string> description;
  for (const auto& [key, value] : file.metadata())
    if (key.starts_with("model.")) description.emplace(key, value);
  return description;
}

int average(const std::vector<fs::path>& inputs, const fs::path& output) {
  // One file in memory at a time (a big model's checkpoint with its Adam moments is 2.6 GB);
  // sums in double, so that the mean of k float checkpoints is exact to float precision.
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::map<std::string, std::string> description;
  std::vector<std::vector<double>> sums;
  fs::path first;
  for (const auto& path : inputs) {
    const auto file = st::file::load(path);
    if (names.empty()) {
      first = path;
      for (const auto& name : file.names())
        if (name.starts_with("model.")) names.push_back(name);
      if (names.empty()) throw st::format_error(path, "holds no model.* tensors: not an attn checkpoint");
      description = model_description(file);
      for (const auto& name : names) {
        shapes.push_back(file.at(name).shape);
        sums.emplace_back(file.at(name).bytes / sizeof(float), 0.0);
      }
    } else if (model_description(file) != description) {
      throw st::format_error(path, "belongs to another model than " + first.string() + " (its model.* metadata differ)");
    }
    for (std::size_t t = 0; t < names.size(); ++t) {
      const auto& info = file.at(names[t]);
      if (info.type != st::dtype::f32 || info.shape != shapes[t])
        throw st::format_error(path, "tensor '" + names[t] + "' differs in type or shape from " + first.string());
      const auto values = file.values<float>(names[t]);
      for (std::size_t i = 0; i < values.size(); ++i) sums[t][i] += values[i];
    }
    std::fprintf(stderr, "read %s\n", path.c_str());
  }

  std::vector<std::vector<float>> means;
  for (const auto& sum : sums) {
    auto& mean = means.emplace_back(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = float(sum[i] / double(inputs.size()));
  }
  st::writer out;
  for (std::size_t t = 0; t < names.size(); ++t) out.add(names[t], shapes[t], means[t].data());
  for (const auto& [key, value] : description) out.set_metadata(key, value);
  out.set_metadata("attn.format", attn::train::weights_format);
  std::string sources;
  for (const auto& path : inputs) sources += (sources.empty() ? "" : ",") + path.filename().string();
  out.set_metadata("attn.averaged_from", sources);
  out.save(output);
  std::fprintf(stderr, "wrote %s: the mean of %zu checkpoints\n", output.c_str(), inputs.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attn-average: averages the weights of the last k checkpoints of an attn-train run (paper §6.1)",
               "attn-average"};
  fs::path run;
  std::vector<fs::path> files;
  fs::path output;
  int last = 5;
  app.add_option("--run", run, "an attn-train --out directory: average its newest checkpoints")
      ->check(CLI::ExistingDirectory);
  app.add_option("--last", last, "how many of the newest checkpoints to average")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("checkpoints", files, "checkpoint files to average instead of --run's")->check(CLI::ExistingFile);
  app.add_option("--out", output, "the averaged weights (default: RUN/averaged.safetensors)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (run.empty() == files.empty()) {
    std::fprintf(stderr, "attn-average: give either --run DIR or checkpoint files\n");
    return 2;
  }
  try {
    if (!run.empty()) {
      auto found = attn::train::checkpoint_files(run);
      if (found.empty()) throw std::runtime_error("no checkpoint-*.safetensors in '" + run.string() + "'");
      if (int(found.size()) < last)
        std::fprintf(stderr, "attn-average: warning: '%s' holds %zu checkpoints, fewer than --last %d\n", run.c_str(),
                     found.size(), last);
      files.assign(found.end() - std::min<std::ptrdiff_t>(last, std::ptrdiff_t(found.size())), found.end());
      if (output.empty()) output = run / "averaged.safetensors";
    }
    if (output.empty()) {
      std::fprintf(stderr, "attn-average: --out is needed with checkpoint files\n");
      return 2;
    }
    return average(files, output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-average: %s\n", e.what());
    return 1;
  }
}
