// An output file written whole or not at all: the programs' checkpoints, averaged weights,
// translations and scores. Written to a temporary beside it, synced, renamed over it, and the
// rename synced, so a reader never sees half a file, and a crash, a full disk or a file-size limit
// leaves the previous file as it was (docs/checkpoints.md, "Saving atomically"). What is not a
// regular file is written in place (write_target.hpp).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "write_target.hpp"

namespace attn::train {

/// A failed system call: "<file>: could not <action>: <strerror(errno)>".
class io_error : public std::system_error {
 public:
  io_error(const std::filesystem::path& file, std::string_view action, int error_number)
      : std::system_error(error_number, std::generic_category(), file.string() + ": could not " + std::string(action)) {
  }
};

namespace detail {

/// errno when a system call returned -1, else 0. Read at once: building a message can change errno.
inline int error_of(long result) { return result == -1 ? errno : 0; }

/// Writes all `size` bytes (write may take fewer at a time); returns 0 or the errno.
inline int write_all(int descriptor, const void* data, std::size_t size) {
  const auto* next = static_cast<const char*>(data);
  while (size > 0) {
    const ::ssize_t written = ::write(descriptor, next, std::min<std::size_t>(size, std::size_t(1) << 30));
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno;
    if (written == 0) return EIO;  // not for a regular file; never loop on it
    next += written;
    size -= std::size_t(written);
  }
  return 0;
}

/// Closes a descriptor on every path out of a function.
class descriptor_guard {
 public:
  explicit descriptor_guard(int descriptor) : descriptor_(descriptor) {}
  descriptor_guard(const descriptor_guard&) = delete;
  descriptor_guard& operator=(const descriptor_guard&) = delete;
  ~descriptor_guard() {
    if (descriptor_ >= 0) ::close(descriptor_);
  }
  int get() const noexcept { return descriptor_; }
  /// Gives up ownership, for a close whose result matters.
  int release() noexcept { return std::exchange(descriptor_, -1); }

 private:
  int descriptor_;
};

}  // namespace detail

/// Opened by its constructor, filled by `write`, put in place by `commit`. Destroyed without a
/// commit (an exception on the way), it removes its temporary: the previous file stays. Every
/// failure is an io_error that names the path as given and the system's reason.
class output_file {
 public:
  explicit output_file(std::filesystem::path path)
      : path_(std::move(path)), target_(resolve_write_target(path_)), temporary_(target_.path.string() + ".tmp"),
        out_(::open(written().c_str(), O_WRONLY | O_CREAT | (target_.in_place ? O_APPEND : 0) | O_CLOEXEC, 0666)) {
    if (const int error = detail::error_of(out_.get()))
      throw io_error(path_, target_.in_place ? "open it for writing" : "create the temporary file " + temporary_.string(),
                     error);
    if (target_.in_place) return;
    // Locked while it is written (attn-translate's grows for the whole decoding), so that a second
    // writer of the same file stops here instead of cutting and interleaving it. A temporary left
    // by a killed process is not locked, and is cut. A file system without locks is not checked.
    if (::flock(out_.get(), LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK)
      throw io_error(path_, "write it: another process is writing it (its temporary " + temporary_.string() +
                                " is locked)", EWOULDBLOCK);
    if (const int error = detail::error_of(::ftruncate(out_.get(), 0)))
      throw io_error(path_, "empty the temporary file " + temporary_.string(), error);
    owns_temporary_ = true;
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (owns_temporary_) ::unlink(temporary_.c_str());
  }

  void write(const void* data, std::size_t size) {
    check_open("write");
    if (const int error = detail::write_all(out_.get(), data, size))
      throw io_error(path_, target_.in_place ? "write it" : "write " + temporary_.string(), error);
  }
  void write(std::string_view text) { write(text.data(), text.size()); }

  /// Written in place, not through a temporary: a device, a pipe (write_target.hpp).
  bool in_place() const noexcept { return target_.in_place; }
  /// The file the commit replaces: the path, or where its links lead (write_target.hpp).
  const std::filesystem::path& target() const noexcept { return target_.path; }

  /// The temporary, no longer removed when this is destroyed: what was written stays there
  /// (when keeping it under another name failed).
  const std::filesystem::path& release_temporary() noexcept {
    owns_temporary_ = false;
    return temporary_;
  }

  /// The temporary synced, closed and renamed over the file, and the rename synced; in place,
  /// closed (a device or a pipe has nothing to sync or rename). If only the last sync fails the
  /// new file is already in place; the io_error says so, since it may not survive a power cut.
  /// Once: the file is closed after it.
  void commit() { commit_to(path_, target_.path); }

  /// As commit, but renamed to `other` (a regular file, or a new name, in the same file system),
  /// while the file itself stays as it was: what a program had written when it was stopped,
  /// kept under another name (attn-translate's OUTPUT.partial). In place, the same as commit.
  void commit_as(const std::filesystem::path& other) {
    commit_to(other, target_.in_place ? target_.path : resolve_write_target(other).path);
  }

 private:
  /// commit and commit_as: `named` is what messages name, `renamed_to` where the temporary goes.
  void commit_to(const std::filesystem::path& named, const std::filesystem::path& renamed_to) {
    check_open("commit");
    if (target_.in_place) {
      if (const int error = detail::error_of(::close(out_.release()))) throw io_error(named, "close it", error);
      return;
    }
    if (const int error = detail::error_of(::fsync(out_.get())))
      throw io_error(named, "flush " + temporary_.string() + " to the disk", error);
    if (const int error = detail::error_of(::close(out_.release())))
      throw io_error(named, "close " + temporary_.string(), error);
    if (const int error = detail::error_of(::rename(temporary_.c_str(), renamed_to.c_str())))
      throw io_error(named, "rename " + temporary_.string() + " over it", error);
    owns_temporary_ = false;

    // Without this the rename itself may be lost in a power cut, leaving the old file.
    const std::filesystem::path directory = renamed_to.has_parent_path() ? renamed_to.parent_path() : ".";
    detail::descriptor_guard directory_descriptor(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    int error = detail::error_of(directory_descriptor.get());
    if (error == 0) error = detail::error_of(::fsync(directory_descriptor.get()));
    // Some file systems cannot sync a directory (EINVAL); there is nothing more to do on them.
    if (error != 0 && error != EINVAL)
      throw io_error(named, "sync its directory " + directory.string() + " (the file was written)", error);
  }

  void check_open(const char* what) const {
    if (out_.get() < 0)
      throw std::logic_error("attn::train::output_file: " + std::string(what) + " after commit (" + path_.string() + ")");
  }
  const std::filesystem::path& written() const { return target_.in_place ? path_ : temporary_; }

  std::filesystem::path path_;  // as given: what messages name
  write_target target_;
  std::filesystem::path temporary_;
  detail::descriptor_guard out_;
  bool owns_temporary_ = false;  // created by this object and not yet renamed
};

}  // namespace attn::train
