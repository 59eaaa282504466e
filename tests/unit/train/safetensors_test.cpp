// Tests of include/attn/train/safetensors.hpp: round trips, the bytes on disk, every truncation and
// bit flip of a file, hand-made bad headers, and saves that fail without harming the old file.
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <attn/train/safetensors.hpp>

namespace {

namespace st = attn::train::safetensors;
namespace fs = std::filesystem;
using bytes = std::vector<unsigned char>;


bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, const bytes& contents, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(contents.data()), std::streamsize(size));
}

void write_file(const fs::path& path, const bytes& contents) { write_file(path, contents, contents.size()); }

/// A file put together by hand: the length prefix (`header_length`, by default the header's real
/// length), the header exactly as given (no padding), then `data_size` bytes of data.
bytes raw_file(const std::string& header, std::size_t data_size, std::uint64_t header_length = ~0ull) {
  if (header_length == ~0ull) header_length = header.size();
  bytes contents;
  for (int i = 0; i < 8; ++i) contents.push_back(static_cast<unsigned char>(header_length >> (8 * i)));
  contents.insert(contents.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_size; ++i) contents.push_back(static_cast<unsigned char>(i * 7));
  return contents;
}

/// The message of the `Error` that `action` throws; any other exception fails the test case.
template <class Error, class Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "(nothing thrown)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// FNV-1a 64 written again from its definition, so the test does not trust the header's.
std::uint64_t fnv1a64(const bytes& data) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char byte : data) {
    hash ^= byte;
    hash *= 1099511628211ull;
  }
  return hash;
}

/// A small valid file: every attn dtype, metadata, and little enough to flip every bit of.
void write_small_file(const fs::path& path) {
  static const float weights[] = {0.5f, -1.25f, 3.0f};
  static const std::int64_t step = 1234;
  static const double scale = 0.125;
  static const std::int32_t tokens[] = {7, -8};
  st::writer out;
  out.add("weights", {3}, weights);
  out.add("step", {}, &step);
  out.add("scale", {1}, &scale);
  out.add("tokens", {2}, tokens);
  out.set_metadata("kind", "test");
  out.save(path);
}

}  // namespace

TEST_CASE("safetensors: dtype names and sizes follow the format") {
  static_assert(st::dtype_of<float> == st::dtype::f32 && st::dtype_of<double> == st::dtype::f64);
  static_assert(st::dtype_of<std::int32_t> == st::dtype::i32 && st::dtype_of<std::int64_t> == st::dtype::i64);
  static_assert(st::dtype_name(st::dtype::f32) == "F32" && st::dtype_size(st::dtype::f64) == 8);
  static_assert(st::dtype_name(st::dtype::bf16) == "BF16" && st::dtype_size(st::dtype::boolean) == 1);
  static_assert(!st::element<bool> && !st::element<long double>);
  for (const auto& row : st::detail::dtype_rows) CHECK(st::parse_dtype(row.name) == row.type);
  CHECK(!st::parse_dtype("f32"));
  CHECK(!st::parse_dtype("F31"));
}

TEST_CASE("safetensors: round trip of F32, F64, I32 and I64 tensors, a scalar, an empty tensor and metadata") {
  attn::test::scratch_dir directory;
  const fs::path path = directory / "model.safetensors";
  const std::vector<float> weights = {1.5f, -2.0f, 0.0f, 3.25f, -0.0f, 1e-30f};
  const std::vector<double> moments = {1e300, -1e-300, 0.1, 42.0};
  const std::int64_t step = -9'000'000'000'000;
  const std::vector<std::int32_t> tokens = {1, 2, 3, -2147483647 - 1, 2147483647};

  st::writer out;
  out.add("decoder.weights", {2, 3}, weights.data());
  out.add("tokens", {5}, tokens.data());
  out.add("moments", {4}, moments.data());
  out.add("empty", {3, 0}, static_cast<const std::int32_t*>(nullptr));
  out.add("step", {}, &step);
  out.set_metadata("format", "attn training checkpoint");
  out.set_metadata("note", "ünïcödé and \"quotes\"\n");
  out.save(path);
  CHECK(!fs::exists(directory / "model.safetensors.tmp"));

  const st::file in = st::file::load(path);
  // 8-byte elements first, then 4-byte ones; the order added within each width.
  CHECK(in.names() == std::vector<std::string>{"moments", "step", "decoder.weights", "tokens", "empty"});
  CHECK(in.contains("step"));
  CHECK(!in.contains("steps"));

  CHECK(in.at("decoder.weights").type == st::dtype::f32);
  CHECK(in.at("decoder.weights").shape == std::vector<std::int64_t>{2, 3});
  CHECK(in.at("decoder.weights").bytes == 24);
  const auto read_weights = in.values<float>("decoder.weights");
  CHECK(std::vector<float>(read_weights.begin(), read_weights.end()) == weights);
  CHECK(std::signbit(read_weights[4]));  // -0.0 keeps its sign: bytes are copied, not converted

  const auto read_moments = in.values<double>("moments");
  CHECK(std::vector<double>(read_moments.begin(), read_moments.end()) == moments);
  const auto read_tokens = in.values<std::int32_t>("tokens");
  CHECK(std::vector<std::int32_t>(read_tokens.begin(), read_tokens.end()) == tokens);

  CHECK(in.at("step").shape.empty());
  REQUIRE(in.values<std::int64_t>("step").size() == 1);
  CHECK(in.values<std::int64_t>("step")[0] == step);

  CHECK(in.at("empty").shape == std::vector<std::int64_t>{3, 0});
  CHECK(in.at("empty").bytes == 0);
  CHECK(in.values<std::int32_t>("empty").empty());

  // Every tensor starts at a multiple of its element size, so values() reads in place.
  for (const auto& name : in.names()) CHECK(in.at(name).offset % st::dtype_size(in.at(name).type) == 0);

  CHECK(in.metadata().at("format") == "attn training checkpoint");
  CHECK(in.metadata().at("note") == "ünïcödé and \"quotes\"\n");
  REQUIRE(in.metadata().count("attn.checksum") == 1);
  CHECK(in.metadata().at("attn.checksum").size() == 16);

  std::array<float, 6> copied{};
  in.copy_to("decoder.weights", {2, 3}, copied.data());
  CHECK(std::vector<float>(copied.begin(), copied.end()) == weights);
  std::int64_t copied_step = 0;
  const std::vector<std::int64_t> scalar_shape;
  in.copy_to("step", scalar_shape, &copied_step);
  CHECK(copied_step == step);
  const auto raw = in.bytes("moments");
  CHECK(raw.size() == 32);
  CHECK(std::memcmp(raw.data(), moments.data(), 32) == 0);

  // Saving again over the file replaces it.
  st::writer again;
  again.add("step", {}, &step);
  again.save(path);
  CHECK(st::file::load(path).names() == std::vector<std::string>{"step"});
  CHECK(!fs::exists(directory / "model.safetensors.tmp"));
}

TEST_CASE("safetensors: the bytes on disk follow the format") {
  attn::test::scratch_dir directory;
  const fs::path path = directory / "tiny.safetensors";
  const float values[] = {1.0f, -2.0f};
  st::writer out;
  out.add("w", {2}, values);
  out.set_metadata("k", "v");
  out.save(path);

  const bytes contents = read_file(path);
  REQUIRE(contents.size() >= 8);
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | contents[std::size_t(i)];
  CHECK(header_length % 8 == 0);  // padded so that the data starts 8-byte aligned
  REQUIRE(contents.size() == 8 + header_length + 8);

  const std::string header(contents.begin() + 8, contents.begin() + 8 + std::ptrdiff_t(header_length));
  const std::string checksum_prefix = R"({"__metadata__":{"attn.checksum":")";
  REQUIRE(header.starts_with(checksum_prefix));
  const std::string digits = header.substr(checksum_prefix.size(), 16);
  const std::string json =
      checksum_prefix + digits + R"(","k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(header.substr(0, json.size()) == json);
  CHECK(header.size() - json.size() < 8);
  CHECK(header.find_first_not_of(' ', json.size()) == std::string::npos);  // padding is spaces

  // 1.0f = 0x3f800000 and -2.0f = 0xc0000000, little-endian.
  const bytes data(contents.end() - 8, contents.end());
  CHECK(data == bytes{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0});

  // The checksum: FNV-1a 64 over the header with its digits zeroed, then the data.
  bytes hashed(contents.begin() + 8, contents.end());
  std::fill_n(hashed.begin() + std::ptrdiff_t(checksum_prefix.size()), 16, '0');
  char expected[17];
  std::snprintf(expected, sizeof expected, "%016llx", static_cast<unsigned long long>(fnv1a64(hashed)));
  CHECK(digits == expected);
}

TEST_CASE("safetensors: files from other writers load when no checksum is required") {
  attn::test::scratch_dir directory;
  const fs::path path = directory / "other.safetensors";
  // No metadata, no padding, spaces in the JSON, and an F64 at offset 4, misaligned for reading
  // in place.
  const std::string header = R"({ "b": {"shape": [1], "dtype": "F64", "data_offsets": [4, 12]},)"
                             R"( "a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]} })";
  bytes contents = raw_file(header, 12);
  const float a = -7.5f;
  const double b = 2.0 / 3.0;
  std::memcpy(contents.data() + 8 + header.size(), &a, 4);
  std::memcpy(contents.data() + 8 + header.size() + 4, &b, 8);
  write_file(path, contents);

  const std::string required = error_of<st::format_error>([&] { (void)st::file::load(path); });
  CHECK(required.starts_with(path.string() + ": "));
  CHECK(contains(required, "no attn.checksum in the metadata"));

  const st::file in = st::file::load(path, /*require_checksum=*/false);
  CHECK(in.names() == std::vector<std::string>{"a", "b"});
  CHECK(in.metadata().empty());
  CHECK(in.values<float>("a")[0] == a);
  CHECK(in.values<double>("b")[0] == b);
  CHECK(reinterpret_cast<std::uintptr_t>(in.values<double>("b").data()) % alignof(double) == 0);

  write_file(path, raw_file("{}", 0));
  CHECK(st::file::load(path, false).names().empty());
}

TEST_CASE("safetensors: every truncation of a file is a format_error") {
  attn::test::scratch_dir directory;
  const fs::path good = directory / "good.safetensors", cut = directory / "cut.safetensors";
  write_small_file(good);
  const bytes contents = read_file(good);
  REQUIRE(contents.size() > 100);
  std::size_t accepted = 0, other_errors = 0;
  write_file(cut, contents);
  for (std::size_t size = contents.size(); size-- > 0;) {
    fs::resize_file(cut, size);  // shrinking in place: cheaper than rewriting the file each time
    try {
      (void)st::file::load(cut, /*require_checksum=*/false);  // structure alone must catch it
      ++accepted;
    } catch (const st::format_error& error) {
      if (!std::string(error.what()).starts_with(cut.string() + ": ")) ++other_errors;
    } catch (...) {
      ++other_errors;
    }
  }
  CHECK(accepted == 0);
  CHECK(other_errors == 0);
  CHECK(st::file::load(good).names().size() == 4);
}

TEST_CASE("safetensors: every single-bit flip of a file is a format_error") {
  attn::test::scratch_dir directory;
  const fs::path good = directory / "good.safetensors", flipped = directory / "flipped.safetensors";
  write_small_file(good);
  const bytes contents = read_file(good);
  const std::string text(contents.begin(), contents.end());
  // Renaming the checksum key leaves a file without one, which only a required checksum rejects.
  const std::size_t key_at = text.find("\"attn.checksum\"") + 1, key_end = key_at + 13;

  std::size_t accepted = 0, accepted_unrequired = 0, other_errors = 0;
  write_file(flipped, contents);
  std::fstream patch(flipped, std::ios::in | std::ios::out | std::ios::binary);
  const auto put = [&](std::size_t at, unsigned char byte) {  // in place: rewriting whole files is slow
    patch.seekp(std::streamoff(at));
    patch.put(char(byte));
    patch.flush();
  };
  for (std::size_t at = 0; at < contents.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      put(at, contents[at] ^ static_cast<unsigned char>(1u << bit));
      for (const bool require_checksum : {true, false}) {
        if (!require_checksum && at >= key_at && at < key_end) continue;
        try {
          (void)st::file::load(flipped, require_checksum);
          ++(require_checksum ? accepted : accepted_unrequired);
        } catch (const st::format_error&) {
        } catch (...) {
          ++other_errors;
        }
      }
    }
    put(at, contents[at]);
  }
  REQUIRE(patch.good());
  CHECK(read_file(flipped) == contents);  // every byte was put back
  CHECK(accepted == 0);
  CHECK(accepted_unrequired == 0);
  CHECK(other_errors == 0);
}

TEST_CASE("safetensors: bad headers are rejected with a message that says what is wrong") {
  attn::test::scratch_dir directory;
  const fs::path path = directory / "bad.safetensors";
  struct bad_file {
    std::string description;
    bytes contents;
    std::string expected;
  };
  const std::string f32_4 = R"("dtype":"F32","shape":[1],"data_offsets":[0,4])";
  const std::vector<bad_file> cases = {
      {"shorter than the length",
       {1, 0, 0},
       "truncated: a safetensors file starts with an 8-byte header length, the file has 3 bytes"},
      {"huge header length", raw_file("{}", 0, 1ull << 40), "more than the 100000000"},
      {"header past the end", raw_file("{}", 0, 1000),
       "truncated: the header length says 1000 bytes of header, the file has 2"},
      {"not JSON", raw_file(R"({"a":)", 0), "the header is not valid JSON"},
      {"trailing garbage after the JSON", raw_file("{} x", 0), "the header is not valid JSON"},
      {"non-object JSON", raw_file("[1,2,3]", 0), "the header must be a JSON object, it is array"},
      {"unknown dtype", raw_file(R"({"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}})", 4),
       "tensor 'a': unknown dtype \"F31\" (expected one of F32, F64"},
      {"dtype not a string", raw_file(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4),
       "tensor 'a': unknown dtype 4"},
      {"entry not an object", raw_file(R"({"a":[1]})", 0), "tensor 'a': expected an object"},
      {"missing field", raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4), "tensor 'a': missing shape"},
      {"unexpected field", raw_file(R"({"a":{)" + f32_4 + R"(,"crc":1}})", 4), "tensor 'a': unexpected field 'crc'"},
      {"negative extent", raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       "tensor 'a': shape must be an array of non-negative integers, it is [-1]"},
      {"fractional extent", raw_file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
       "shape must be an array of non-negative integers"},
      {"overflowing shape",
       raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
       "tensor 'a': shape [4294967296, 4294967296] is too large"},
      {"one offset", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 4),
       "tensor 'a': data_offsets must be two non-negative integers [begin, end], it is [4]"},
      {"offsets backwards", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
       "tensor 'a': data_offsets [4, 0] end before they begin"},
      {"shape and bytes differ", raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "tensor 'a': dtype F32 and shape [3] make 12 bytes, but data_offsets [0, 8] hold 8"},
      {"overlapping offsets",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                8),
       "tensors 'a' [0, 8] and 'b' [4, 8] overlap"},
      {"a hole", raw_file(R"({"a":{)" + f32_4 + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12),
       "hole in the tensor data between 'a', which ends at 4, and 'b' [8, 12]"},
      {"a hole at the start", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "hole in the tensor data: it must start at offset 0, the first tensor is 'a' [4, 8]"},
      {"truncated data", raw_file(R"({"a":{"dtype":"F32","shape":[1024],"data_offsets":[0,4096]}})", 1000),
       "truncated: the header says 4096 bytes of tensor data, the file has 1000"},
      {"trailing data", raw_file(R"({"a":{)" + f32_4 + "}}", 12),
       "the header says 4 bytes of tensor data, the file has 12 (trailing bytes)"},
      {"duplicate tensor", raw_file(R"({"a":{)" + f32_4 + R"(},"a":{)" + f32_4 + "}}", 4),
       "the header names 'a' twice"},
      {"metadata not an object", raw_file(R"({"__metadata__":["x"]})", 0),
       "__metadata__ must be an object mapping strings to strings, it is array"},
      {"metadata value not a string", raw_file(R"({"__metadata__":{"epoch":3}})", 0),
       "__metadata__ value of 'epoch' must be a string, it is number"},
      {"malformed checksum", raw_file(R"({"__metadata__":{"attn.checksum":"ABCDEF0123456789"}})", 0),
       "attn.checksum must be 16 lowercase hexadecimal digits"},
      {"checksum written with a space", raw_file(R"({"__metadata__":{"attn.checksum": "0123456789abcdef"}})", 0),
       "attn.checksum must be 16 lowercase hexadecimal digits written as"},
      {"wrong checksum", raw_file(R"({"__metadata__":{"attn.checksum":"0123456789abcdef"}})", 0),
       "checksum mismatch: the file is corrupted"},
  };
  for (const auto& bad : cases) {
    CAPTURE(bad.description);
    write_file(path, bad.contents);
    const std::string message = error_of<st::format_error>([&] { (void)st::file::load(path, false); });
    CAPTURE(message);
    CHECK(message.starts_with(path.string() + ": "));
    CHECK(contains(message, bad.expected));
  }

  // Quoting a value in a message must not recurse into it: JSON can nest deeper than the stack.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::vector<bad_file> deep_cases = {
      {"deep shape", raw_file(R"({"a":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,4]}})", 4),
       "shape must be an array of non-negative integers, it is [[...]]"},
      {"deep dtype", raw_file(R"({"a":{"dtype":)" + deep + R"(,"shape":[1],"data_offsets":[0,4]}})", 4),
       "unknown dtype [[...]]"},
      {"deep offsets", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + deep + "}}", 4),
       "data_offsets must be two non-negative integers [begin, end], it is [[...]]"},
      {"deep metadata", raw_file(R"({"__metadata__":{"k":)" + deep + "}}", 0), "value of 'k' must be a string"},
      {"deep header", raw_file(deep, 0), "the header must be a JSON object, it is array"},
  };
  for (const auto& bad : deep_cases) {
    CAPTURE(bad.description);
    write_file(path, bad.contents);
    const std::string message = error_of<st::format_error>([&] { (void)st::file::load(path, false); });
    CAPTURE(message);
    CHECK(contains(message, bad.expected));
  }

  // A corrupted byte of tensor data is found by the checksum alone.
  write_small_file(path);
  bytes contents = read_file(path);
  contents[contents.size() - 3] ^= 0x10;
  write_file(path, contents);
  CHECK_THROWS_WITH_AS((void)st::file::load(path, false), doctest::Contains("checksum mismatch: the file is corrupted"),
                       st::format_error);
}

TEST_CASE("safetensors: reading the wrong tensor, type or shape names what was expected and found") {
  attn::test::scratch_dir directory;
  const fs::path path = directory / "typed.safetensors";
  const std::vector<float> weights(6, 1.0f);
  st::writer out;
  out.add("w", {2, 3}, weights.data());
  out.save(path);
  const st::file in = st::file::load(path);

  const std::string wrong_type = error_of<st::format_error>([&] { (void)in.values<double>("w"); });
  CHECK(wrong_type.starts_with(path.string() + ": "));
  CHECK(contains(wrong_type, "tensor 'w': expected dtype F64, the file has F32"));

  std::array<float, 6> destination{};
  const std::string wrong_shape = error_of<st::format_error>([&] { in.copy_to("w", {3, 2}, destination.data()); });
  CHECK(wrong_shape.starts_with(path.string() + ": "));
  CHECK(contains(wrong_shape, "tensor 'w': expected shape [3, 2], the file has [2, 3]"));
  const std::string wrong_rank = error_of<st::format_error>([&] { in.copy_to("w", {6}, destination.data()); });
  CHECK(contains(wrong_rank, "expected shape [6], the file has [2, 3]"));
  std::array<std::int32_t, 6> integers{};
  CHECK_THROWS_WITH_AS(in.copy_to("w", {2, 3}, integers.data()),
                       doctest::Contains("expected dtype I32, the file has F32"), st::format_error);

  const std::string missing = error_of<st::format_error>([&] { (void)in.at("v"); });
  CHECK(missing.starts_with(path.string() + ": "));
  CHECK(contains(missing, "no tensor named 'v'"));
  CHECK_THROWS_AS((void)in.values<float>("v"), st::format_error);
}

TEST_CASE("safetensors: a file that cannot be read is an io_error naming it") {
  attn::test::scratch_dir directory;
  const fs::path missing = directory / "missing.safetensors";
  const std::string message = error_of<st::io_error>([&] { (void)st::file::load(missing); });
  CHECK(message.starts_with(missing.string() + ": could not open it"));
  CHECK(contains(message, "No such file or directory"));

  const fs::path folder = directory / "folder.safetensors";
  fs::create_directory(folder);
  CHECK_THROWS_WITH_AS((void)st::file::load(folder), doctest::Contains("Is a directory"), st::io_error);
}

namespace {

/// Lowers the limit on the size of files this process writes, and makes going past it an EFBIG
/// error instead of a SIGXFSZ that kills the process; both come back at the end of the scope.
class file_size_limit {
 public:
  explicit file_size_limit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    saved_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min(bytes, saved_.rlim_max);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lowered) == 0);
  }
  file_size_limit(const file_size_limit&) = delete;
  file_size_limit& operator=(const file_size_limit&) = delete;
  ~file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, saved_handler_);
  }

 private:
  rlimit saved_{};
  void (*saved_handler_)(int) = SIG_DFL;
};

}  // namespace

TEST_CASE("safetensors: a failed save leaves the previous file as it was and no temporary file") {
  attn::test::scratch_dir directory;
  const fs::path path = directory / "checkpoint.safetensors";
  const fs::path temporary = directory / "checkpoint.safetensors.tmp";
  write_small_file(path);
  const bytes previous = read_file(path);

  const std::vector<float> large(1 << 16, 0.5f);  // 256 KiB
  st::writer out;
  out.add("large", {1 << 16}, large.data());
  std::string message;
  {
    const file_size_limit limit(64 * 1024);
    message = error_of<st::io_error>([&] { out.save(path); });
  }
  CHECK(message.starts_with(path.string() + ": could not write " + temporary.string()));
  CHECK(contains(message, "File too large"));
  CHECK(read_file(path) == previous);
  CHECK(!fs::exists(temporary));
  CHECK(st::file::load(path).names().size() == 4);

  // Once the limit is back the same writer saves.
  out.save(path);
  CHECK(st::file::load(path).values<float>("large").size() == large.size());

  const fs::path nowhere = directory / "no-such-directory" / "checkpoint.safetensors";
  const std::string no_directory = error_of<st::io_error>([&] { out.save(nowhere); });
  CHECK(no_directory.starts_with(nowhere.string() + ": could not create the temporary file"));
  CHECK(contains(no_directory, "No such file or directory"));

  // A directory is not a file to rename over: opening it fails, and nothing is written beside it.
  const fs::path folder = directory / "folder";
  fs::create_directory(folder);
  const std::string over_directory = error_of<st::io_error>([&] { out.save(folder); });
  CHECK(over_directory.starts_with(folder.string() + ": could not open it for writing"));
  CHECK(contains(over_directory, "Is a directory"));
  CHECK(fs::is_directory(folder));
  CHECK(!fs::exists(directory / "folder.tmp"));
}

TEST_CASE("safetensors: the writer refuses what it could not write faithfully") {
  const float value = 1.0f;
  st::writer out;
  out.add("w", {1}, &value);
  CHECK_THROWS_WITH_AS(out.add("w", {1}, &value), doctest::Contains("'w' was already added"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(out.add("__metadata__", {1}, &value), doctest::Contains("reserved"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(out.add("v", {2, -1}, &value), doctest::Contains("shape [2, -1]"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(out.add("v", {1LL << 40, 1LL << 40}, &value), doctest::Contains("too large"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(out.add("v", {1}, static_cast<const float*>(nullptr)), doctest::Contains("no data"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(out.add("bad \xff name", {1}, &value), doctest::Contains("not valid UTF-8"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(out.set_metadata("attn.checksum", "0"), doctest::Contains("writer's own"),
                       std::invalid_argument);
  CHECK_NOTHROW(out.add("v", {0}, static_cast<const float*>(nullptr)));
}
