// Safetensors files (github.com/huggingface/safetensors), the checkpoint format: a writer that
// saves atomically with an FNV-1a checksum in the metadata, and a loader that validates everything.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "output_file.hpp"

namespace attn::train::safetensors {

static_assert(std::endian::native == std::endian::little,
              "attn::safetensors: tensor data is stored little-endian and read in place");

/// Element types. The four attn uses come first; the others are there so that files from other
/// tools load (their raw bytes are available through `file::bytes`).
enum class dtype { f32, f64, i32, i64, f16, bf16, f8_e4m3, f8_e5m2, i8, i16, u8, u16, u32, u64, boolean };

namespace detail {

struct dtype_row {
  dtype type;
  std::string_view name;  // as written in the header
  std::size_t size;       // bytes per element
};

// clang-format off
inline constexpr dtype_row dtype_rows[] = {
    {dtype::f32, "F32", 4},         {dtype::f64, "F64", 8},         {dtype::i32, "I32", 4},
    {dtype::i64, "I64", 8},         {dtype::f16, "F16", 2},         {dtype::bf16, "BF16", 2},
    {dtype::f8_e4m3, "F8_E4M3", 1}, {dtype::f8_e5m2, "F8_E5M2", 1}, {dtype::i8, "I8", 1},
    {dtype::i16, "I16", 2},         {dtype::u8, "U8", 1},           {dtype::u16, "U16", 2},
    {dtype::u32, "U32", 4},         {dtype::u64, "U64", 8},         {dtype::boolean, "BOOL", 1},
};
// clang-format on

constexpr const dtype_row& row_of(dtype type) {
  for (const auto& row : dtype_rows)
    if (row.type == type) return row;
  return dtype_rows[0];  // unreachable for a valid enumerator
}

}  // namespace detail

/// The header's name of a dtype: "F32", "I64", …
constexpr std::string_view dtype_name(dtype type) { return detail::row_of(type).name; }

/// Bytes per element.
constexpr std::size_t dtype_size(dtype type) { return detail::row_of(type).size; }

/// The dtype a header name denotes, if any (names are case-sensitive, as in the reference).
constexpr std::optional<dtype> parse_dtype(std::string_view name) {
  for (const auto& row : detail::dtype_rows)
    if (row.name == name) return row.type;
  return std::nullopt;
}

/// C++ types whose values can be read and written in place.
template <class T>
concept element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::int8_t> ||
    std::same_as<T, std::int16_t> || std::same_as<T, std::int32_t> || std::same_as<T, std::int64_t> ||
    std::same_as<T, std::uint8_t> || std::same_as<T, std::uint16_t> || std::same_as<T, std::uint32_t> ||
    std::same_as<T, std::uint64_t>;

namespace detail {

template <element T>
consteval dtype dtype_for() {
  if constexpr (std::same_as<T, float>)
    return dtype::f32;
  else if constexpr (std::same_as<T, double>)
    return dtype::f64;
  else if constexpr (std::same_as<T, std::int8_t>)
    return dtype::i8;
  else if constexpr (std::same_as<T, std::int16_t>)
    return dtype::i16;
  else if constexpr (std::same_as<T, std::int32_t>)
    return dtype::i32;
  else if constexpr (std::same_as<T, std::int64_t>)
    return dtype::i64;
  else if constexpr (std::same_as<T, std::uint8_t>)
    return dtype::u8;
  else if constexpr (std::same_as<T, std::uint16_t>)
    return dtype::u16;
  else if constexpr (std::same_as<T, std::uint32_t>)
    return dtype::u32;
  else
    return dtype::u64;
}

}  // namespace detail

/// The dtype that stores values of type T.
template <element T>
inline constexpr dtype dtype_of = detail::dtype_for<T>();

/// The metadata key under which the writer stores its checksum (see docs/checkpoints.md).
inline constexpr std::string_view checksum_key = "attn.checksum";

/// The reference implementation's limit on the header length; it keeps a corrupted length from
/// turning into a huge allocation.
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

/// A file that is not a valid safetensors file: truncated, corrupted, or not what the caller
/// expected. The message starts with the file's path and says what was expected.
class format_error : public std::runtime_error {
 public:
  format_error(const std::filesystem::path& file, std::string_view what)
      : std::runtime_error(file.string() + ": " + std::string(what)) {}
};

/// A failed system call: "<file>: could not <action>: <strerror(errno)>" (output_file.hpp).
using io_error = train::io_error;

namespace detail {

/// FNV-1a, 64 bits, continued from `state` (start from fnv_offset_basis).
inline constexpr std::uint64_t fnv_offset_basis = 0xcbf29ce484222325ull;
inline std::uint64_t fnv1a64(std::uint64_t state, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) state = (state ^ bytes[i]) * 0x100000001b3ull;
  return state;
}

inline std::string hex16(std::uint64_t value) {
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) text[std::size_t(i)] = "0123456789abcdef"[value & 0xf];
  return text;
}

/// Where the 16 checksum digits sit in a header: right after this exact byte sequence. A quote
/// inside a JSON string is escaped, so the sequence can only be the metadata entry itself.
inline constexpr std::string_view checksum_field = "\"attn.checksum\":\"";

/// product(shape) · element_size, or nothing when a dimension is negative or the product overflows.
inline std::optional<std::uint64_t> byte_count(std::span<const std::int64_t> shape, std::size_t element_size) {
  std::uint64_t count = element_size;
  bool empty = false;  // a zero dimension makes any product of the others harmless
  for (std::int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    if (extent == 0) empty = true;
  }
  if (empty) return 0;
  for (std::int64_t extent : shape) {
    if (count > std::numeric_limits<std::uint64_t>::max() / std::uint64_t(extent)) return std::nullopt;
    count *= std::uint64_t(extent);
  }
  return count;
}

inline std::string shape_string(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

inline std::string offsets_string(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

/// A JSON string literal: quoted and escaped. Throws nlohmann's type_error on invalid UTF-8.
inline std::string json_quoted(const std::string& text) { return nlohmann::json(text).dump(); }

using train::detail::descriptor_guard;
using train::detail::error_of;

/// Reads up to `size` bytes, fewer only at the end of the file, and counts them in `got`;
/// returns 0 or the errno.
inline int read_all(int descriptor, void* data, std::size_t size, std::size_t& got) {
  auto* next = static_cast<char*>(data);
  got = 0;
  while (got < size) {
    const ::ssize_t part = ::read(descriptor, next + got, std::min<std::size_t>(size - got, std::size_t(1) << 30));
    if (part < 0 && errno == EINTR) continue;
    if (part < 0) return errno;
    if (part == 0) break;
    got += std::size_t(part);
  }
  return 0;
}

}  // namespace detail

/// Collects tensors (views: nothing is copied until `save`) and metadata, and writes them as one
/// safetensors file. Tensors are laid out widest element first, in the order added within one
/// width, so that every tensor starts at a multiple of its element size (as the reference does).
class writer {
 public:
  /// `data` holds product(shape) · dtype_size(type) bytes and must outlive `save`.
  void add(std::string name, dtype type, std::vector<std::int64_t> shape, const void* data) {
    if (name == "__metadata__")
      throw std::invalid_argument("attn::safetensors::writer: '__metadata__' is reserved and cannot name a tensor");
    check_utf8("tensor name", name);
    if (names_.contains(name))
      throw std::invalid_argument("attn::safetensors::writer: a tensor named '" + name + "' was already added");
    const auto bytes = detail::byte_count(shape, dtype_size(type));
    if (!bytes || *bytes > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      throw std::invalid_argument("attn::safetensors::writer: tensor '" + name + "' has shape " +
                                  detail::shape_string(shape) + ", which is negative or too large");
    if (*bytes > 0 && data == nullptr)
      throw std::invalid_argument("attn::safetensors::writer: tensor '" + name + "' has no data");
    names_.insert(name);
    tensors_.push_back({std::move(name), type, std::move(shape), data, std::size_t(*bytes)});
  }

  /// The dtype follows from T.
  template <element T>
  void add(std::string name, std::vector<std::int64_t> shape, const T* data) {
    add(std::move(name), dtype_of<T>, std::move(shape), static_cast<const void*>(data));
  }

  /// A string entry of "__metadata__"; setting a key again replaces its value.
  void set_metadata(std::string key, std::string value) {
    if (key == checksum_key)
      throw std::invalid_argument("attn::safetensors::writer: the metadata key 'attn.checksum' is the writer's own");
    check_utf8("metadata key", key);
    check_utf8("metadata value", value);
    metadata_.insert_or_assign(std::move(key), std::move(value));
  }

  /// Writes `path` whole or not at all (output_file): through `path` + ".tmp" in the same
  /// directory with every write checked, synced, renamed over `path`, and the directory synced.
  /// On failure the temporary file is removed, a previous `path` is left as it was, and io_error
  /// names the file and the reason. Links are followed to the name they end at; a device, a pipe
  /// or a name through /proc (/dev/null, /dev/stdout) is written in place, appended.
  void save(const std::filesystem::path& path) const {
    std::vector<const tensor*> layout;
    for (const auto& t : tensors_) layout.push_back(&t);
    std::stable_sort(layout.begin(), layout.end(),
                     [](const tensor* a, const tensor* b) { return dtype_size(a->type) > dtype_size(b->type); });

    std::string header = "{\"__metadata__\":{";
    header += detail::checksum_field;
    const std::size_t checksum_at = header.size();
    header += std::string(16, '0') + "\"";
    for (const auto& [key, value] : metadata_)
      header += "," + detail::json_quoted(key) + ":" + detail::json_quoted(value);
    header += "}";
    std::uint64_t offset = 0;
    for (const tensor* t : layout) {
      header +=
          "," + detail::json_quoted(t->name) + ":{\"dtype\":\"" + std::string(dtype_name(t->type)) + "\",\"shape\":[";
      for (std::size_t i = 0; i < t->shape.size(); ++i) {  // appended apart: GCC 12's -Wrestrict misfires (PR 105651)
        if (i > 0) header += ",";
        header += std::to_string(t->shape[i]);
      }
      header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t->bytes) + "]}";
      offset += t->bytes;
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');  // the data then starts 8-byte aligned

    std::uint64_t checksum = detail::fnv1a64(detail::fnv_offset_basis, header.data(), header.size());
    for (const tensor* t : layout) checksum = detail::fnv1a64(checksum, t->data, t->bytes);
    header.replace(checksum_at, 16, detail::hex16(checksum));

    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(std::uint64_t(header.size()) >> (8 * i));

    output_file out(path);
    out.write(length, sizeof length);
    out.write(header);
    for (const tensor* t : layout) out.write(t->data, t->bytes);
    out.commit();
  }

 private:
  struct tensor {
    std::string name;
    dtype type;
    std::vector<std::int64_t> shape;
    const void* data;
    std::size_t bytes;
  };

  static void check_utf8(std::string_view what, const std::string& text) {
    try {
      (void)detail::json_quoted(text);
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument("attn::safetensors::writer: " + std::string(what) + " is not valid UTF-8");
    }
  }

  std::vector<tensor> tensors_;
  std::set<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

/// A safetensors file read whole into memory and validated: nothing partial is ever returned.
/// Move-only; the spans it hands out live as long as it does.
class file {
 public:
  struct info {
    dtype type;
    std::vector<std::int64_t> shape;
    std::size_t offset;  // from the start of the data section
    std::size_t bytes;
  };

  /// Reads and validates `path` (see docs/checkpoints.md for the list of checks). A file with an
  /// attn.checksum is always verified; `require_checksum` also rejects files without one, which
  /// is right for attn's own checkpoints and wrong for files written by other tools.
  /// Throws io_error when the file cannot be read and format_error when it is not valid.
  static file load(const std::filesystem::path& path, bool require_checksum = true) {
    file loaded;
    loaded.path_ = path;
    detail::descriptor_guard in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (const int error = detail::error_of(in.get())) throw io_error(path, "open it", error);
    struct ::stat status {};
    if (const int error = detail::error_of(::fstat(in.get(), &status))) throw io_error(path, "stat it", error);
    if (S_ISDIR(status.st_mode)) throw io_error(path, "read it", EISDIR);  // its st_size means nothing here
    const std::uint64_t file_size = std::uint64_t(status.st_size);
    const auto read = [&](void* data, std::size_t size) {
      std::size_t got = 0;
      if (const int error = detail::read_all(in.get(), data, size, got)) throw io_error(path, "read it", error);
      if (got != size)
        throw loaded.failure("truncated while reading: the file shrank from " + std::to_string(file_size) + " bytes");
    };

    if (file_size < 8)
      throw loaded.failure("truncated: a safetensors file starts with an 8-byte header length, the file has " +
                           std::to_string(file_size) + " bytes");
    unsigned char length[8];
    read(length, sizeof length);
    std::uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length[i];
    if (header_size > max_header_bytes)
      throw loaded.failure("the header length is " + std::to_string(header_size) + " bytes, more than the " +
                           std::to_string(max_header_bytes) +
                           " a safetensors header may have (is this a safetensors file?)");
    if (header_size > file_size - 8)
      throw loaded.failure("truncated: the header length says " + std::to_string(header_size) +
                           " bytes of header, the file has " + std::to_string(file_size - 8) + " after the length");
    std::string header(std::size_t(header_size), '\0');
    read(header.data(), header.size());
    const std::uint64_t data_size = file_size - 8 - header_size;
    loaded.data_.reset(new std::byte[std::size_t(data_size)]);  // operator new aligns it for any element
    read(loaded.data_.get(), std::size_t(data_size));

    const nlohmann::json json = loaded.parse_header(header);
    if (!json.is_object())
      throw loaded.failure("the header must be a JSON object, it is " + std::string(json.type_name()));
    for (const auto& [name, entry] : json.items()) {
      if (name == "__metadata__")
        loaded.read_metadata(entry);
      else
        loaded.tensors_.push_back(loaded.read_entry(name, entry));
    }
    loaded.check_layout(data_size);
    loaded.check_checksum(header, data_size, require_checksum);

    for (std::size_t i = 0; i < loaded.tensors_.size(); ++i) {
      tensor& t = loaded.tensors_[i];
      loaded.index_.emplace(t.name, i);
      t.data = loaded.data_.get() + t.meta.offset;
      // Other writers may place a tensor at an offset that is not a multiple of its element size;
      // reading it in place would be misaligned, so such a tensor gets its own copy.
      if (reinterpret_cast<std::uintptr_t>(t.data) % dtype_size(t.meta.type) != 0) {
        t.realigned.reset(new std::byte[t.meta.bytes]);
        std::memcpy(t.realigned.get(), t.data, t.meta.bytes);
        t.data = t.realigned.get();
      }
    }
    return loaded;
  }

  const std::filesystem::path& path() const noexcept { return path_; }

  /// The "__metadata__" entries, attn.checksum included when present.
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

  /// Tensor names in the order of their data in the file.
  std::vector<std::string> names() const {
    std::vector<std::string> result;
    for (const auto& t : tensors_) result.push_back(t.name);
    return result;
  }

  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }

  /// Throws format_error naming the file and the tensor when there is no such tensor.
  const info& at(std::string_view name) const { return find(name).meta; }

  /// The tensor's bytes, whatever its dtype.
  std::span<const std::byte> bytes(std::string_view name) const {
    const tensor& t = find(name);
    return {t.data, t.meta.bytes};
  }

  /// The tensor's values; format_error (naming both dtypes) unless it is stored as T.
  template <element T>
  std::span<const T> values(std::string_view name) const {
    const tensor& t = find(name);
    if (t.meta.type != dtype_of<T>)
      throw format_error(path_, "tensor '" + std::string(name) + "': expected dtype " +
                                    std::string(dtype_name(dtype_of<T>)) + ", the file has " +
                                    std::string(dtype_name(t.meta.type)));
    return {reinterpret_cast<const T*>(t.data), t.meta.bytes / sizeof(T)};
  }

  /// Copies the tensor into `destination` after checking that it is stored as T with shape
  /// `expected_shape`; format_error names both shapes (or both dtypes) when not.
  template <element T>
  void copy_to(std::string_view name, std::span<const std::int64_t> expected_shape, T* destination) const {
    const std::span<const T> source = values<T>(name);
    const info& stored = at(name);
    if (!std::ranges::equal(stored.shape, expected_shape))
      throw format_error(path_, "tensor '" + std::string(name) + "': expected shape " +
                                    detail::shape_string(expected_shape) + ", the file has " +
                                    detail::shape_string(stored.shape));
    if (!source.empty()) std::memcpy(destination, source.data(), source.size_bytes());
  }

  template <element T>
  void copy_to(std::string_view name, std::initializer_list<std::int64_t> expected_shape, T* destination) const {
    copy_to(name, std::span<const std::int64_t>(expected_shape.begin(), expected_shape.size()), destination);
  }

 private:
  struct tensor {
    std::string name;
    info meta;
    const std::byte* data = nullptr;
    std::unique_ptr<std::byte[]> realigned;  // only for a tensor misaligned in the file
  };

  file() = default;

  const tensor& find(std::string_view name) const {
    const auto found = index_.find(name);
    if (found == index_.end()) throw format_error(path_, "no tensor named '" + std::string(name) + "'");
    return tensors_[found->second];
  }

  format_error failure(const std::string& what) const { return format_error(path_, what); }

  nlohmann::json parse_header(const std::string& header) const {
    // nlohmann keeps the last of duplicate keys silently; a duplicate is a corrupt header.
    std::vector<std::set<std::string>> open_objects;
    std::string duplicate;
    const auto watch = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      using event_t = nlohmann::json::parse_event_t;
      if (event == event_t::object_start)
        open_objects.emplace_back();
      else if (event == event_t::object_end)
        open_objects.pop_back();
      else if (event == event_t::key && !open_objects.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(header.begin(), header.end(), watch, /*allow_exceptions=*/true,
                                   /*ignore_comments=*/false);
    } catch (const nlohmann::json::exception& error) {
      throw failure(std::string("the header is not valid JSON: ") + error.what());
    }
    if (!duplicate.empty()) throw failure("the header names '" + duplicate + "' twice");
    return json;
  }

  void read_metadata(const nlohmann::json& entry) {
    if (!entry.is_object())
      throw failure("__metadata__ must be an object mapping strings to strings, it is " +
                    std::string(entry.type_name()));
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string())
        throw failure("__metadata__ value of '" + key + "' must be a string, it is " + std::string(value.type_name()));
      metadata_.emplace(key, value.get<std::string>());
    }
  }

  static std::optional<std::uint64_t> count_of(const nlohmann::json& value) {
    if (value.is_number_unsigned()) return value.get<std::uint64_t>();
    if (value.is_number_integer() && value.get<std::int64_t>() >= 0) return std::uint64_t(value.get<std::int64_t>());
    return std::nullopt;
  }

  tensor read_entry(const std::string& name, const nlohmann::json& entry) const {
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object())
      throw failure(where + "expected an object with dtype, shape and data_offsets, it is " +
                    std::string(entry.type_name()));
    for (const auto& [field, value] : entry.items())
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        throw failure(where + "unexpected field '" + field + "' (expected dtype, shape and data_offsets)");
    const auto field = [&](const char* key) -> const nlohmann::json& {
      const auto found = entry.find(key);
      if (found == entry.end()) throw failure(where + "missing " + key);
      return *found;
    };

    const nlohmann::json& type_name = field("dtype");
    std::optional<dtype> type = type_name.is_string() ? parse_dtype(type_name.get<std::string>()) : std::nullopt;
    if (!type) {
      std::string known;
      for (const auto& row : detail::dtype_rows) known += (known.empty() ? "" : ", ") + std::string(row.name);
      throw failure(where + "unknown dtype " + excerpt(type_name) + " (expected one of " + known + ")");
    }

    const nlohmann::json& shape_json = field("shape");
    std::vector<std::int64_t> shape;
    if (shape_json.is_array()) {
      for (const auto& extent : shape_json) {
        const auto value = count_of(extent);
        if (!value || *value > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
          shape.clear();
          break;
        }
        shape.push_back(std::int64_t(*value));
      }
    }
    if (!shape_json.is_array() || shape.size() != shape_json.size())
      throw failure(where + "shape must be an array of non-negative integers, it is " + excerpt(shape_json));
    const auto bytes = detail::byte_count(shape, dtype_size(*type));
    if (!bytes) throw failure(where + "shape " + detail::shape_string(shape) + " is too large");

    const nlohmann::json& offsets = field("data_offsets");
    std::optional<std::uint64_t> begin, end;
    if (offsets.is_array() && offsets.size() == 2) begin = count_of(offsets[0]), end = count_of(offsets[1]);
    if (!begin || !end)
      throw failure(where + "data_offsets must be two non-negative integers [begin, end], it is " + excerpt(offsets));
    if (*end < *begin)
      throw failure(where + "data_offsets " + detail::offsets_string(*begin, *end) + " end before they begin");
    if (*end - *begin != *bytes)
      throw failure(where + "dtype " + std::string(dtype_name(*type)) + " and shape " + detail::shape_string(shape) +
                    " make " + std::to_string(*bytes) + " bytes, but data_offsets " +
                    detail::offsets_string(*begin, *end) + " hold " + std::to_string(*end - *begin));
    // Both fit: they are checked against the data section's size, which is in memory, later.
    return {name, {*type, std::move(shape), std::size_t(*begin), std::size_t(*end - *begin)}, nullptr, nullptr};
  }

  /// A short quote of a value for a message. Never dump() a nested value: it recurses, and a
  /// corrupted header can nest a million deep.
  static std::string excerpt(const nlohmann::json& value) {
    const auto shallow = [](const nlohmann::json& v) {
      return v.is_array() ? std::string("[...]") : v.is_object() ? std::string("{...}") : v.dump();
    };
    std::string text;
    if (value.is_array()) {
      text = "[";
      for (std::size_t i = 0; i < value.size() && text.size() <= 60; ++i) text += (i ? "," : "") + shallow(value[i]);
      text += "]";
    } else {
      text = shallow(value);
    }
    return text.size() <= 60 ? text : text.substr(0, 57) + "...";
  }

  /// The data section holds the tensors back to back from offset 0 to its end, in some order.
  void check_layout(std::uint64_t data_size) {
    // Same offsets only for empty tensors; those go in name order (nlohmann sorted the keys).
    std::stable_sort(tensors_.begin(), tensors_.end(), [](const tensor& a, const tensor& b) {
      return std::pair(a.meta.offset, a.meta.bytes) < std::pair(b.meta.offset, b.meta.bytes);
    });
    std::uint64_t expected = 0;
    const tensor* previous = nullptr;
    for (const tensor& t : tensors_) {
      const std::uint64_t begin = t.meta.offset, end = begin + t.meta.bytes;
      const std::string range = "'" + t.name + "' " + detail::offsets_string(begin, end);
      if (begin < expected)
        throw failure("tensors '" + previous->name + "' " + detail::offsets_string(previous->meta.offset, expected) +
                      " and " + range + " overlap");
      if (begin > expected)
        throw failure(previous ? "hole in the tensor data between '" + previous->name + "', which ends at " +
                                     std::to_string(expected) + ", and " + range
                               : "hole in the tensor data: it must start at offset 0, the first tensor is " + range);
      expected = end;
      previous = &t;
    }
    if (expected > data_size)
      throw failure("truncated: the header says " + std::to_string(expected) + " bytes of tensor data, the file has " +
                    std::to_string(data_size));
    if (expected < data_size)
      throw failure("the header says " + std::to_string(expected) + " bytes of tensor data, the file has " +
                    std::to_string(data_size) + " (trailing bytes)");
  }

  void check_checksum(const std::string& header, std::uint64_t data_size, bool required) const {
    const auto stored = metadata_.find(std::string(checksum_key));
    if (stored == metadata_.end()) {
      if (required)
        throw failure(
            "no attn.checksum in the metadata (was it written by another tool? load it with "
            "require_checksum = false to accept it)");
      return;
    }
    const std::string& digits = stored->second;
    const std::size_t at = header.find(detail::checksum_field);
    const bool well_formed = digits.size() == 16 &&
                             std::all_of(digits.begin(), digits.end(),
                                         [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }) &&
                             at != std::string::npos &&
                             header.compare(at + detail::checksum_field.size(), 16, digits) == 0;
    if (!well_formed)
      throw failure("attn.checksum must be 16 lowercase hexadecimal digits written as \"attn.checksum\":\"<digits>\"");
    const std::size_t digits_at = at + detail::checksum_field.size();
    const std::string zeros(16, '0');
    std::uint64_t checksum = detail::fnv1a64(detail::fnv_offset_basis, header.data(), digits_at);
    checksum = detail::fnv1a64(checksum, zeros.data(), zeros.size());
    checksum = detail::fnv1a64(checksum, header.data() + digits_at + 16, header.size() - digits_at - 16);
    checksum = detail::fnv1a64(checksum, data_.get(), std::size_t(data_size));
    if (detail::hex16(checksum) != digits)
      throw failure("checksum mismatch: the file is corrupted (attn.checksum is " + digits + ", the contents hash to " +
                    detail::hex16(checksum) + ")");
  }

  std::filesystem::path path_;
  std::map<std::string, std::string> metadata_;
  std::vector<tensor> tensors_;  // in file order
  std::map<std::string, std::size_t, std::less<>> index_;
  std::unique_ptr<std::byte[]> data_;  // the data section
};

}  // namespace attn::train::safetensors
