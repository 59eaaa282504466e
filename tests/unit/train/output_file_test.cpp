// Tests of include/attn/train/output_file.hpp: a file is replaced whole at commit, or not at all.
// (Saving through links and into pipes is in write_target_test.cpp; full disks and file-size
// limits in safetensors_test.cpp, whose writer saves through output_file.)
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>

#include <attn/train/output_file.hpp>

namespace {

namespace fs = std::filesystem;
using attn::test::file_contents;
using attn::train::output_file;

}  // namespace

TEST_CASE("output_file: the file is replaced at commit; until then it is as it was") {
  attn::test::scratch_dir dir("output-file");
  const fs::path path = dir.write("out.txt", "old\n");
  const fs::path temporary = dir.path / "out.txt.tmp";
  {
    output_file out(path);
    out.write("new ");
    out.write("text\n", 5);
    CHECK(file_contents(path) == "old\n");
    CHECK(file_contents(temporary) == "new text\n");
    out.commit();
  }
  CHECK(file_contents(path) == "new text\n");
  CHECK_FALSE(fs::exists(temporary));

  output_file once(path);
  once.commit();
  CHECK(file_contents(path).empty());
  CHECK_THROWS_AS(once.write("late"), std::logic_error);
  CHECK_THROWS_AS(once.commit(), std::logic_error);
}

TEST_CASE("output_file: given up without a commit, the previous file stays and the temporary goes") {
  attn::test::scratch_dir dir("output-file-abandoned");
  const fs::path path = dir.write("out.txt", "old\n");
  try {
    output_file out(path);
    out.write("half of it");
    throw std::runtime_error("the writer stopped");
  } catch (const std::runtime_error&) {
  }
  CHECK(file_contents(path) == "old\n");
  CHECK_FALSE(fs::exists(dir.path / "out.txt.tmp"));

  const fs::path fresh = dir.path / "fresh.txt";  // a new name is not created either
  { output_file out(fresh); }
  CHECK_FALSE(fs::exists(fresh));
}

TEST_CASE("output_file: commit_as keeps what was written under another name, the file as it was") {
  attn::test::scratch_dir dir("output-file-commit-as");
  const fs::path path = dir.write("out.txt", "old\n");
  const fs::path partial = dir.write("out.txt.partial", "an earlier run's\n");  // replaced
  {
    output_file out(path);
    CHECK_FALSE(out.in_place());
    out.write("the first lines\n");
    out.commit_as(partial);
    CHECK_THROWS_AS(out.write("late"), std::logic_error);
  }
  CHECK(file_contents(path) == "old\n");
  CHECK(file_contents(partial) == "the first lines\n");
  CHECK_FALSE(fs::exists(dir.path / "out.txt.tmp"));

  // Through a link, to the file the link names (the link stays, as commit's does).
  const fs::path named = dir.write("named.partial", "");
  const fs::path link = dir.path / "link.partial";
  fs::create_symlink("named.partial", link);
  CHECK(output_file(link).target() == named);
  {
    output_file out(path);
    CHECK(out.target() == path);
    out.write("more\n");
    out.commit_as(link);
  }
  CHECK(fs::is_symlink(link));
  CHECK(file_contents(named) == "more\n");

  // A device is written in place: there is nothing to rename, and the other name is not made.
  output_file device("/dev/null");
  CHECK(device.in_place());
  device.write("gone\n");
  device.commit_as(dir.path / "null.partial");
  CHECK_FALSE(fs::exists(dir.path / "null.partial"));
}

TEST_CASE("output_file: a second writer of the same file is refused while the first writes") {
  attn::test::scratch_dir dir("output-file-locked");
  const fs::path path = dir.write("out.txt", "old\n");
  const fs::path temporary = dir.path / "out.txt.tmp";
  dir.write("out.txt.tmp", "left by a killed process\n");  // not locked: cut and reused
  output_file first(path);
  CHECK(file_contents(temporary).empty());
  first.write("the first writer's\n");
  CHECK_THROWS_WITH_AS(output_file{path},
                       (path.string() + ": could not write it: another process is writing it (its temporary " +
                        temporary.string() + " is locked): Resource temporarily unavailable").c_str(),
                       attn::train::io_error);
  CHECK(file_contents(temporary) == "the first writer's\n");  // neither cut nor removed
  first.commit();
  CHECK(file_contents(path) == "the first writer's\n");
  output_file after(path);  // free again
  after.commit();
  CHECK(file_contents(path).empty());
}

TEST_CASE("output_file: a temporary released stays where it is") {
  attn::test::scratch_dir dir("output-file-released");
  const fs::path path = dir.path / "out.txt";
  fs::path kept;
  {
    output_file out(path);
    out.write("kept\n");
    kept = out.release_temporary();
  }
  CHECK(kept == dir.path / "out.txt.tmp");
  CHECK(file_contents(kept) == "kept\n");
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("output_file: errors name the path as given and the system's reason") {
  attn::test::scratch_dir dir("output-file-errors");
  const fs::path nowhere = dir.path / "missing" / "out.txt";
  CHECK_THROWS_WITH_AS(output_file{nowhere},
                       (nowhere.string() + ": could not create the temporary file " + nowhere.string() +
                        ".tmp: No such file or directory").c_str(),
                       attn::train::io_error);
  CHECK_THROWS_WITH_AS(output_file{dir.path}, (dir.path.string() + ": could not open it for writing: Is a directory").c_str(),
                       attn::train::io_error);
}
