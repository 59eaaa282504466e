// The checkpoints of a run: OUT/checkpoint-<step>.safetensors, newest kept, oldest pruned.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

namespace attn::trainer {

class checkpoint_directory {
 public:
  checkpoint_directory(std::filesystem::path directory, int keep) : directory_(std::move(directory)), keep_(keep) {}

  /// Every checkpoint in the directory, oldest first.
  std::vector<std::filesystem::path> all() const;
  std::optional<std::filesystem::path> newest() const;

  /// Writes the checkpoint of `step` through `write` (which writes atomically), then removes
  /// all but the newest `keep`. Returns its path; throws what `write` throws.
  std::filesystem::path save(long step, const std::function<void(const std::filesystem::path&)>& write);

  static std::filesystem::path name(long step);

 private:
  std::filesystem::path directory_;
  int keep_;
};

}  // namespace attn::trainer
