// A fresh directory for a test under the system's temporary directory, removed with everything
// in it. Named by process and a counter, so that tests running side by side never share one.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

namespace attn::test {

struct scratch_dir {
  std::filesystem::path path;

  explicit scratch_dir(const std::string& name = "scratch") {
    static int count = 0;
    path = std::filesystem::temp_directory_path() /
           ("attn-test-" + std::to_string(::getpid()) + "-" + std::to_string(count++) + "-" + name);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return path / name; }

  /// Writes `bytes` to a file of the directory; returns its path.
  std::filesystem::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
    return path / name;
  }
};

/// A file's bytes (empty when it cannot be read).
inline std::string file_contents(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace attn::test
