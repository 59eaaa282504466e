// Where a file that is written through a temporary file and a rename really goes. The rename
// keeps readers from ever seeing half a file, but over anything other than a regular file it
// does harm. Over /dev/null, a terminal or a pipe (/dev/stdout, a shell's >(...)) it would put a
// regular file in the device's or pipe's place (as root, /dev/null itself). Over a symbolic link
// it would replace the link and leave the file it names unwritten.
#pragma once

#include <filesystem>
#include <system_error>

namespace attn::train {

struct write_target {
  std::filesystem::path path;  // the file to write, its symbolic links followed where it exists
  bool in_place = false;       // write `path` directly: not a regular file, or a link to nothing yet
};

/// A regular file or a new name: written through a temporary beside it, renamed over it. A
/// link to a regular file: the same at the file it names (the link stays). Anything else (a
/// device, a pipe, a socket, a link to one of them or to nothing yet, a directory, whose opening
/// then fails with its reason): written in place.
inline write_target resolve_write_target(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status itself = fs::symlink_status(path, error);
  if (!fs::is_symlink(itself)) return {path, fs::exists(itself) && !fs::is_regular_file(itself)};
  const fs::file_status named = fs::status(path, error);
  if (!fs::is_regular_file(named)) return {path, true};
  const fs::path file = fs::canonical(path, error);
  return error ? write_target{path, true} : write_target{file, false};
}

}  // namespace attn::train
