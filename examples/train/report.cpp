// Progress line, metrics log and plots of attn-train.
#include "report.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace attn::trainer {

std::string format_duration(double seconds) {
  const long total = std::lround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  else
    std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  return text;
}

metrics_log::metrics_log(const std::filesystem::path& path, long resumed_step) {
  if (resumed_step >= 0 && std::filesystem::exists(path)) {
    // Rewritten beside and renamed over, so that a crash here cannot lose the history.
    const auto rewritten = std::filesystem::path(path.string() + ".tmp");
    {
      std::ifstream in(path);
      std::ofstream out(rewritten, std::ios::trunc);
      for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<long>() <= resumed_step)
          out << line << '\n';
      }
      if (!out.flush()) throw std::runtime_error("cannot write '" + rewritten.string() + "'");
    }
    std::filesystem::rename(rewritten, path);
  }
  // A new run starts a new log; a resumed one goes on with its own.
  out_.open(path, resumed_step >= 0 ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot open '" + path.string() + "' for writing");
}

void metrics_log::train(const step_report& r) {
  nlohmann::json j = {{"kind", "train"},
                      {"step", r.step},
                      {"loss", r.loss},
                      {"ppl", r.perplexity},
                      {"lr", r.learning_rate},
                      {"grad_norm", r.gradient_norm},
                      {"tokens", r.target_tokens},
                      {"tokens_per_s", r.tokens_per_second},
                      {"elapsed_s", r.elapsed_seconds}};
  if (r.peak_device_mib > 0) j["peak_device_mib"] = r.peak_device_mib;
  if (r.loss_scale > 0) {
    j["loss_scale"] = r.loss_scale;
    j["overflows"] = r.overflows;
  }
  out_ << j.dump() << '\n' << std::flush;
}

void metrics_log::valid(long step, double loss, double perplexity, double tokens) {
  nlohmann::json j = {{"kind", "valid"}, {"step", step}, {"loss", loss}, {"ppl", perplexity}, {"tokens", tokens}};
  out_ << j.dump() << '\n' << std::flush;
}

void metrics_log::skipped(long step, const std::string& reason, double loss_scale) {
  nlohmann::json j = {{"kind", "skipped"}, {"step", step}, {"reason", reason}};
  if (loss_scale > 0) j["loss_scale"] = loss_scale;
  out_ << j.dump() << '\n' << std::flush;
}

progress::progress(long max_steps, double max_minutes, long log_every, long first_step)
    : max_steps_(max_steps),
      max_seconds_(max_minutes * 60),
      log_every_(log_every),
      first_step_(first_step),
      terminal_(isatty(STDERR_FILENO) != 0) {}

double progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string progress::eta(long step) const {
  const double seconds = elapsed();
  double left = -1;
  if (step > first_step_) left = seconds / double(step - first_step_) * double(max_steps_ - step);
  if (max_seconds_ > 0 && (left < 0 || max_seconds_ - seconds < left)) left = max_seconds_ - seconds;
  return left < 0 ? "?" : format_duration(left);
}

void progress::end_line() {
  if (open_line_) std::cerr << '\n';
  open_line_ = false;
}

void progress::train(const step_report& r) {
  if (!terminal_ && r.step % log_every_ != 0 && r.step != max_steps_) return;
  char line[320];
  char memory[48] = "", scaling[64] = "";
  if (r.peak_device_mib > 0) std::snprintf(memory, sizeof memory, " | peak %.0f MiB", r.peak_device_mib);
  if (r.loss_scale > 0)
    std::snprintf(scaling, sizeof scaling, " | loss scale %.0f, %ld overflow(s)", r.loss_scale, r.overflows);
  std::snprintf(line, sizeof line,
                "step %ld/%ld | loss %.3f | ppl %.2f | lr %.2e | %.0f tok/s%s%s | %s elapsed | ETA %s", r.step,
                max_steps_, r.loss, r.perplexity, r.learning_rate, r.tokens_per_second, memory, scaling,
                format_duration(elapsed()).c_str(), eta(r.step).c_str());
  if (terminal_) {
    std::cerr << "\r\033[K" << line << std::flush;
    open_line_ = true;
  } else {
    std::cerr << line << '\n';
  }
}

void progress::valid(long step, double loss, double perplexity) {
  end_line();
  char line[160];
  std::snprintf(line, sizeof line, "step %ld | validation loss %.4f | validation ppl %.3f", step, loss, perplexity);
  std::cerr << line << '\n';
}

void progress::message(const std::string& text) {
  end_line();
  std::cerr << text << '\n';
}

namespace {

/// A path as a gnuplot string: single-quoted, a quote inside written twice.
std::string gnuplot_string(const std::filesystem::path& path) {
  std::string text = "'";
  for (char c : path.string()) text += c == '\'' ? std::string("''") : std::string(1, c);
  return text + "'";
}

/// Runs `gnuplot script` without a shell; its exit status, or -1 if it could not start.
int run_gnuplot(const std::filesystem::path& script) {
  std::string program = "gnuplot", argument = script.string();
  char* argv[] = {program.data(), argument.data(), nullptr};
  pid_t child = 0;
  // gnuplot starts with no signal blocked: the trainer blocks SIGINT and SIGTERM in its threads
  // (examples/common/stop_signals.cpp), and a spawned program would inherit that mask.
  posix_spawnattr_t attributes;
  if (posix_spawnattr_init(&attributes) != 0) return -1;
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  const int spawned = posix_spawnp(&child, "gnuplot", nullptr, &attributes, argv, environ);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

bool plot(const std::filesystem::path& metrics, const std::filesystem::path& png) {
  // gnuplot reads columns, not JSON: the log becomes two tables beside the picture.
  const auto train_table = png.parent_path() / "training-train.tsv";
  const auto valid_table = png.parent_path() / "training-valid.tsv";
  long valid_rows = 0;
  {
    std::ifstream in(metrics);
    std::ofstream train(train_table), valid(valid_table);
    train << "# step\tloss\tppl\tlr\n";
    valid << "# step\tloss\tppl\n";
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("kind")) continue;
      if (j["kind"] == "train") {
        train << j["step"] << '\t' << j["loss"] << '\t' << j["ppl"] << '\t' << j["lr"] << '\n';
      } else if (j["kind"] == "valid") {
        valid << j["step"] << '\t' << j["loss"] << '\t' << j["ppl"] << '\n';
        ++valid_rows;
      }
    }
  }
  const auto script_path = png.parent_path() / "training.gnuplot";
  {
    std::ofstream script(script_path);
    script << "set terminal pngcairo size 1000,700 noenhanced\n"
           << "set output " << gnuplot_string(png) << "\n"
           << "set multiplot layout 2,1\n"
           << "set grid\nset xlabel 'step'\nset ylabel 'loss per target token'\n"
           << "plot " << gnuplot_string(train_table) << " using 1:2 with lines title 'training'";
    if (valid_rows > 0) script << ", " << gnuplot_string(valid_table) << " using 1:2 with linespoints title 'validation'";
    script << "\n"
           << "set ylabel 'learning rate'\n"
           << "plot " << gnuplot_string(train_table) << " using 1:4 with lines title 'equation (3)'\n"
           << "unset multiplot\n";
  }
  const int status = run_gnuplot(script_path);
  if (status != 0) {
    std::cerr << "attn-train: " << (status < 0 ? "--plot needs gnuplot (apt-get install gnuplot-nox)" : "gnuplot failed on " + script_path.string())
              << "; no plot drawn\n";
    return false;
  }
  return true;
}

}  // namespace attn::trainer
