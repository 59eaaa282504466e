// attn-average: the mean of the weights of the last k checkpoints of a run (paper §6.1: "we
// used a single model obtained by averaging the last 5 checkpoints").
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <attn/train/average.hpp>
#include <attn/train/checkpoint.hpp>

namespace {

namespace fs = std::filesystem;

int average(const std::vector<fs::path>& inputs, const fs::path& output) {
  std::fprintf(stderr, "averaging %zu checkpoints:\n", inputs.size());
  for (const auto& path : inputs) std::fprintf(stderr, "  %s\n", path.c_str());
  attn::train::save_averaged(output, attn::train::average_checkpoints(inputs));
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
  std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit makes the write fail (and be reported), not kill us
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
    for (const auto& input : files) {  // averaged weights have no optimizer state: a run could not resume
      std::error_code error;
      if (fs::equivalent(input, output, error))
        throw std::runtime_error("--out " + output.string() + " is " + input.string() +
                                 ", one of the checkpoints being averaged");
    }
    return average(files, output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-average: %s\n", e.what());
    return 1;
  }
}
