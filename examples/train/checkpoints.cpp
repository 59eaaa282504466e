// The checkpoints of a run.
#include "checkpoints.hpp"

#include <attn/train/checkpoint.hpp>

namespace attn::trainer {

std::filesystem::path checkpoint_directory::name(long step) { return train::checkpoint_name(step); }

std::vector<std::filesystem::path> checkpoint_directory::all() const { return train::checkpoint_files(directory_); }

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
