// The checkpoints of a run.
#include "checkpoints.hpp"

#include <algorithm>
#include <cstdio>
#include <regex>

namespace attn::trainer {

std::filesystem::path checkpoint_directory::name(long step) {
  char text[48];
  std::snprintf(text, sizeof text, "checkpoint-%08ld.safetensors", step);  // zero-padded: names sort by step
  return text;
}

std::vector<std::filesystem::path> checkpoint_directory::all() const {
  static const std::regex pattern(R"(checkpoint-\d{8,}\.safetensors)");
  std::vector<std::filesystem::path> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, error))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), pattern))
      found.push_back(entry.path());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    const auto x = a.filename().string(), y = b.filename().string();
    return x.size() != y.size() ? x.size() < y.size() : x < y;
  });
  return found;
}

std::optional<std::filesystem::path> checkpoint_directory::newest() const {
  auto found = all();
  if (found.empty()) return std::nullopt;
  return found.back();
}

std::filesystem::path checkpoint_directory::save(long step, const std::function<void(const std::filesystem::path&)>& write) {
  const auto path = directory_ / name(step);
  write(path);
  auto found = all();
  for (std::size_t i = 0; i + std::size_t(keep_) < found.size(); ++i) {
    std::error_code ignored;  // a checkpoint that cannot be removed is only disk space
    std::filesystem::remove(found[i], ignored);
  }
  return path;
}

}  // namespace attn::trainer
