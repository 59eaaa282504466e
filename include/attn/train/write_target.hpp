// Where a file that is written through a temporary file and a rename really goes. The rename
// keeps readers from ever seeing half a file, but over anything other than a regular file it
// does harm. Over /dev/null, a terminal or a pipe (a shell's >(...)) it would put a regular file
// in the device's or pipe's place (as root, /dev/null itself). Over a symbolic link it would
// replace the link and leave the file it names unwritten.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace attn::train {

struct write_target {
  std::filesystem::path path;  // the file to write: where the path's links lead
  // Write `path` directly, opened for appending: it is not a regular file. A device or a pipe has
  // no end to cut, and a file named through /proc (/dev/stdout sent to a file) keeps what was
  // written to it before, as writing to the descriptor itself would.
  bool in_place = false;
};

/// A regular file or a new name is written through a temporary beside it, renamed over it. A
/// chain of symbolic links is followed link by link to the name it ends at, which is then
/// treated the same way (the links stay). Written in place, at `path` itself: a device, a pipe,
/// a socket, a directory (whose opening then fails with its reason), and any chain through
/// /proc (/dev/stdout, /dev/fd/N): those name an open descriptor, and the file a shell
/// redirected it to is the shell's, not a name to rename over.
inline write_target resolve_write_target(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path at = path;
  const auto in_proc = [&](const fs::path& link) {  // its directory's real place (/dev/fd is /proc/self/fd)
    const fs::path directory = fs::canonical(fs::absolute(link, error).parent_path(), error);
    return !error && (directory / "").string().starts_with("/proc/");
  };
  for (int links = 0; fs::is_symlink(fs::symlink_status(at, error)); ++links) {
    if (in_proc(at)) return {path, true};
    const fs::path next = fs::read_symlink(at, error);
    if (error || links == 40) return {path, true};  // unreadable or looping: opening says why
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  const fs::file_status status = fs::status(at, error);
  if (fs::exists(status) && !fs::is_regular_file(status)) return {path, true};
  return {at, false};
}

}  // namespace attn::train
