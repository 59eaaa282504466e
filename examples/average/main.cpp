// attn-average: the mean of the weights of the last k checkpoints of a run (paper §6.1: "we
// used a single model obtained by averaging the last 5 checkpoints").
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <attn/train/checkpoint.hpp>
#include <attn/train/safetensors.hpp>

namespace {

namespace fs = std::filesystem;
namespace st = attn::train::safetensors;

/// OUT/checkpoint-<step>.safetensors of a run directory, oldest first.
std::vector<fs::path> checkpoints_in(const fs::path& directory) {
  static const std::regex pattern(R"(checkpoint-\d{8,}\.safetensors)");
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(directory))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), pattern))
      found.push_back(entry.path());
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
    const auto x = a.filename().string(), y = b.filename().string();
    return x.size() != y.size() ? x.size() < y.size() : x < y;
  });
  return found;
}

/// The metadata that says which model a file belongs to: every "model.*" key.
std::map<std::string, std::string> model_description(const st::file& file) {
  std::map<std::string, std::string> description;
  for (const auto& [key, value] : file.metadata())
    if (key.starts_with("model.")) description.emplace(key, value);
  return description;
}

int average(const std::vector<fs::path>& inputs, const fs::path& output) {
  std::vector<st::file> files;
  for (const auto& path : inputs) {
    files.push_back(st::file::load(path));
    std::fprintf(stderr, "read %s\n", path.c_str());
  }
  const st::file& first = files.front();
  std::vector<std::string> names;
  for (const auto& name : first.names())
    if (name.starts_with("model.")) names.push_back(name);
  if (names.empty()) throw st::format_error(first.path(), "holds no model.* tensors: not an attn checkpoint");
  const auto description = model_description(first);
  for (const auto& file : files) {
    if (model_description(file) != description)
      throw st::format_error(file.path(), "belongs to another model than " + first.path().string() +
                                              " (its model.* metadata differ)");
    for (const auto& name : names) {
      const auto& info = file.at(name);
      const auto& reference = first.at(name);
      if (info.type != st::dtype::f32 || info.shape != reference.shape)
        throw st::format_error(file.path(), "tensor '" + name + "' differs in type or shape from " +
                                                first.path().string());
    }
  }

  // Sums in double, so that the mean of k float checkpoints is exact to float precision.
  std::vector<std::vector<float>> means;
  means.reserve(names.size());
  for (const auto& name : names) {
    std::vector<double> sum(first.at(name).bytes / sizeof(float), 0.0);
    for (const auto& file : files) {
      const auto values = file.values<float>(name);
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
    }
    auto& mean = means.emplace_back(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = float(sum[i] / double(files.size()));
  }

  st::writer out;
  for (std::size_t i = 0; i < names.size(); ++i) out.add(names[i], first.at(names[i]).shape, means[i].data());
  for (const auto& [key, value] : description) out.set_metadata(key, value);
  out.set_metadata("attn.format", attn::train::weights_format);
  std::string sources;
  for (const auto& path : inputs) sources += (sources.empty() ? "" : ",") + path.filename().string();
  out.set_metadata("attn.averaged_from", sources);
  out.save(output);
  std::fprintf(stderr, "wrote %s: the mean of %zu checkpoints\n", output.c_str(), files.size());
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
      auto found = checkpoints_in(run);
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
