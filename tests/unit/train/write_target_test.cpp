// Tests of include/attn/train/write_target.hpp: which outputs are renamed into place and which
// are written where they are, and safetensors::writer::save through a link and into a pipe.
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <attn/train/safetensors.hpp>
#include <attn/train/write_target.hpp>

namespace {

namespace fs = std::filesystem;
using attn::test::file_contents;
using attn::train::resolve_write_target;

std::vector<float> saved_values(const fs::path& path) {
  const auto file = attn::train::safetensors::file::load(path);
  const auto values = file.values<float>("values");
  return {values.begin(), values.end()};
}

attn::train::safetensors::writer small_writer(const std::vector<float>& values) {
  attn::train::safetensors::writer out;
  out.add("values", {std::int64_t(values.size())}, values.data());
  return out;
}

}  // namespace

TEST_CASE("write_target: regular files and new names are renamed into place, the rest written in place") {
  attn::test::scratch_dir directory;
  const fs::path file = directory.write("file.txt", "old");
  const fs::path fresh = directory / "fresh.txt";
  REQUIRE(::mkfifo((directory / "pipe").c_str(), 0600) == 0);
  fs::create_directory(directory / "folder");
  fs::create_directory(directory / "other");
  fs::create_symlink(file, directory / "link.txt");
  fs::create_symlink("link.txt", directory / "link-to-link.txt");              // relative, to a link
  fs::create_symlink("../file.txt", directory / "other" / "relative.txt");     // relative, another directory
  fs::create_symlink(directory / "pipe", directory / "link-to-pipe");
  fs::create_symlink(directory / "missing.txt", directory / "dangling");

  for (const fs::path& renamed : {file, fresh}) {
    const auto target = resolve_write_target(renamed);
    CHECK(!target.in_place);
    CHECK(target.path == renamed);
  }
  // Links to a regular file, however reached: the file they name is renamed over, the links stay.
  for (const fs::path& link :
       {directory / "link.txt", directory / "link-to-link.txt", directory / "other" / "relative.txt"}) {
    const auto target = resolve_write_target(link);
    CHECK_MESSAGE(!target.in_place, link.string());
    CHECK(fs::equivalent(target.path, file));
  }
  // A link to nothing yet: the name it ends at is new, and written as new names are.
  const auto dangling = resolve_write_target(directory / "dangling");
  CHECK(!dangling.in_place);
  CHECK(dangling.path == directory / "missing.txt");
  // A pipe, a link to one, a directory, a device: written where they are.
  for (const fs::path& in_place :
       {directory / "pipe", directory / "link-to-pipe", directory / "folder", fs::path("/dev/null")}) {
    const auto target = resolve_write_target(in_place);
    CHECK_MESSAGE(target.in_place, in_place.string());
    CHECK(target.path == in_place);
  }
  // A descriptor's name in /proc, even of a regular file: the file is whoever opened it's, as
  // with `attn-translate --output /dev/stdout >> log`, which must not rename over log.
  const int descriptor = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(descriptor >= 0);
  for (const fs::path& name : {fs::path("/proc/self/fd") / std::to_string(descriptor),
                               fs::path("/dev/fd") / std::to_string(descriptor)}) {
    if (!fs::exists(name)) continue;  // no /proc mounted
    const auto target = resolve_write_target(name);
    CHECK_MESSAGE(target.in_place, name.string());
    CHECK(target.path == name);
  }
  ::close(descriptor);
}

TEST_CASE("safetensors: a save through a link replaces the file it names and keeps the link") {
  attn::test::scratch_dir directory;
  const fs::path file = directory.write("weights.safetensors", "old");
  const fs::path link = directory / "latest.safetensors";
  fs::create_symlink(file, link);
  small_writer({1.f, 2.f, 3.f}).save(link);
  CHECK(fs::is_symlink(link));
  CHECK(saved_values(file) == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(!fs::exists(directory / "weights.safetensors.tmp"));
  CHECK(!fs::exists(directory / "latest.safetensors.tmp"));

  // A link to nothing yet: the file is created where it points, through a temporary there.
  const fs::path dangling = directory / "dangling.safetensors";
  fs::create_symlink(directory / "created.safetensors", dangling);
  small_writer({4.f}).save(dangling);
  CHECK(fs::is_symlink(dangling));
  CHECK(saved_values(directory / "created.safetensors") == std::vector<float>{4.f});
  CHECK(!fs::exists(directory / "created.safetensors.tmp"));
}

TEST_CASE("safetensors: a save into a pipe writes the file's bytes into it and leaves the pipe a pipe") {
  attn::test::scratch_dir directory;
  const std::vector<float> values{0.5f, -1.f};
  small_writer(values).save(directory / "regular.safetensors");
  const fs::path pipe = directory / "pipe";
  REQUIRE(::mkfifo(pipe.c_str(), 0600) == 0);
  // Both ends of our own, opened before save(): the reader never waits for a writer to open, and
  // our writer keeps it from seeing the end before save() has written (or, if save() renamed a
  // file over the pipe, until we close ours: a failure, not a hang).
  const int read_end = ::open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(read_end >= 0);
  REQUIRE(::fcntl(read_end, F_SETFL, 0) == 0);  // reads block again
  const int held = ::open(pipe.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(held >= 0);
  std::string received;
  std::thread reader([&] {
    char buffer[4096];
    for (ssize_t n; (n = ::read(read_end, buffer, sizeof buffer)) > 0;) received.append(buffer, std::size_t(n));
  });
  CHECK_NOTHROW(small_writer(values).save(pipe));  // a throw must not skip the join below
  ::close(held);
  reader.join();
  ::close(read_end);
  CHECK(fs::is_fifo(pipe));
  CHECK(received == file_contents(directory / "regular.safetensors"));
  CHECK(!fs::exists(directory / "pipe.tmp"));
}
