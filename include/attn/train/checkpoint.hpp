// Training checkpoints: the weights, Adam's moments and everything else a run needs to go on
// exactly where it stopped, as one safetensors file (names in docs/checkpoints.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "../core/transfer.hpp"
#include "../grad/parameter.hpp"
#include "adam.hpp"
#include "batching.hpp"
#include "loss_scale.hpp"
#include "safetensors.hpp"

namespace attn::train {

/// Where a run is, besides its tensors.
struct training_state {
  long step = 0;                   // optimizer steps taken
  data_position data;              // the next batch to read
  std::uint64_t batches_seen = 0;  // batches read so far: numbers each batch's dropout stream
  std::uint64_t seed = 0;          // data order, initialisation, dropout
  long bad_steps_in_row = 0;       // steps skipped for a non-finite loss or gradient
  loss_scale_state loss_scale;     // float16's dynamic loss scale (scale 0: none)
};

/// What a checkpoint must agree with to be loaded into a model: widths, N, vocabulary size...
using model_description = std::map<std::string, std::string>;

inline constexpr const char* checkpoint_format = "attn-checkpoint-1";  // weights, moments, state
inline constexpr const char* weights_format = "attn-weights-1";        // weights only (averaged)

namespace detail {

template <class T>
std::vector<std::int64_t> sizes_of(const grad::parameter_ref<T>& p) {
  return {p.sizes.begin(), p.sizes.end()};
}

inline std::string shape_text(const std::vector<std::int64_t>& sizes) {
  std::string text = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

/// Reads and validates an attn checkpoint or weights file. attn writes a checksum into every one,
/// so a file without one was written or rewritten by another tool: refused with what a user of
/// the programs can do about it (safetensors' own message names a parameter of its loader).
inline safetensors::file load_file(const std::filesystem::path& path) {
  auto file = safetensors::file::load(path, /*require_checksum=*/false);  // a checksum present is still verified
  if (!file.metadata().contains(std::string(safetensors::checksum_key)))
    throw safetensors::format_error(
        path, "no attn.checksum in the metadata: attn writes one into every checkpoint, so another tool "
              "wrote or rewrote this file; to load it, add one (python3 tests/train/safetensors_read.py "
              "--add-checksum FILE OUT; docs/checkpoints.md)");
  return file;
}

inline std::string required(const safetensors::file& file, const std::filesystem::path& path, const std::string& key) {
  const auto& meta = file.metadata();
  const auto it = meta.find(key);
  if (it == meta.end())
    throw safetensors::format_error(path, "not an attn checkpoint: metadata '" + key + "' is missing");
  return it->second;
}

inline long long number(const safetensors::file& file, const std::filesystem::path& path, const std::string& key) {
  const std::string text = required(file, path, key);
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < 0)
    throw safetensors::format_error(path, "metadata '" + key + "' should be a count, not '" + text + "'");
  return value;
}

/// The loss scale, when the checkpoint has one (a float16 run's): a positive number, the finite
/// steps taken at it and the steps skipped for overflows.
inline loss_scale_state loss_scale(const safetensors::file& file, const std::filesystem::path& path) {
  loss_scale_state state;
  const auto& meta = file.metadata();
  const auto it = meta.find("attn.loss_scale");
  if (it == meta.end()) return state;
  std::size_t used = 0;
  try {
    state.scale = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size() || !(state.scale > 0) || !std::isfinite(state.scale))
    throw safetensors::format_error(path, "metadata 'attn.loss_scale' should be a positive number, not '" +
                                              it->second + "'");
  state.finite_steps = number(file, path, "attn.loss_scale_steps");
  state.overflows = number(file, path, "attn.loss_scale_overflows");
  return state;
}

/// Every description key must be there with the same value: a checkpoint of another model
/// is refused by name instead of loading into the wrong shapes.
inline void check_description(const safetensors::file& file, const std::filesystem::path& path,
                              const model_description& expected) {
  for (const auto& [key, value] : expected) {
    const std::string found = required(file, path, key);
    if (found != value)
      throw safetensors::format_error(path, "written for " + key + " = " + found + ", but this run has " + key +
                                                " = " + value);
  }
}

/// Device elements as the host sees them: the elements themselves on the CPU, else a copy
/// kept here until the writer has saved them.
template <class Device>
class host_staging {
 public:
  template <class T>
  const T* host(const T* elements, index_t count) {
    if constexpr (std::same_as<Device, cpu>) {
      return elements;
    } else {
      auto& copy = copies_.emplace_back(static_cast<std::size_t>(count) * sizeof(T));
      memory<Device>::copy_to_host(copy.data(), elements, copy.size());
      return reinterpret_cast<const T*>(copy.data());
    }
  }

 private:
  std::deque<std::vector<std::byte>> copies_;  // std::byte has no alignment above T's: vectors use new
};

/// Copies a file's tensor into device elements (through the host where they are elsewhere).
template <class Device, class T>
void copy_tensor(const safetensors::file& file, const std::string& name, std::span<const std::int64_t> sizes,
                 T* destination, index_t count) {
  if constexpr (std::same_as<Device, cpu>) {
    file.copy_to(name, sizes, destination);
  } else {
    std::vector<T> staged(static_cast<std::size_t>(count));
    file.copy_to(name, sizes, staged.data());
    copy_from_host<Device>(destination, std::span<const T>(staged));
  }
}

template <class T, class Device, class Moments = std::vector<tensor<T, shape<moment_elements>, Device>>>
void load_tensors(const safetensors::file& file, const std::string& prefix, grad::parameter_list<T, Device>& parameters,
                  Moments* moments = nullptr) {
  auto& refs = parameters.refs();
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto sizes = sizes_of(refs[i]);
    T* destination = moments != nullptr ? (*moments)[i].data() : refs[i].value;
    copy_tensor<Device>(file, prefix + refs[i].name, std::span<const std::int64_t>(sizes), destination, refs[i].size);
  }
}

}  // namespace detail

/// `OUT/checkpoint-<step>.safetensors`, the name of step `step`'s checkpoint in a run directory.
inline std::filesystem::path checkpoint_name(long step) {
  char text[48];
  std::snprintf(text, sizeof text, "checkpoint-%08ld.safetensors", step);  // zero-padded: names sort by step
  return text;
}

/// The checkpoints of a run directory, oldest first (none if it does not exist).
inline std::vector<std::filesystem::path> checkpoint_files(const std::filesystem::path& directory) {
  static const std::regex pattern(R"(checkpoint-\d{8,}\.safetensors)");
  std::vector<std::filesystem::path> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), pattern))
      found.push_back(entry.path());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    const auto x = a.filename().string(), y = b.filename().string();
    return x.size() != y.size() ? x.size() < y.size() : x < y;  // past 8 digits, longer is later
  });
  return found;
}

/// Writes weights, Adam's moments and the state to `path`, atomically: an existing file
/// there stays intact until the new one is complete.
template <class T, class Device>
void save_checkpoint(const std::filesystem::path& path, grad::parameter_list<T, Device>& parameters,
                     const adam<T, Device>& optimizer, const training_state& state,
                     const model_description& description) {
  safetensors::writer out;
  detail::host_staging<Device> staging;
  const auto& refs = parameters.refs();
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const index_t n = refs[i].size;
    out.add("model." + refs[i].name, detail::sizes_of(refs[i]), staging.host(static_cast<const T*>(refs[i].value), n));
    out.add("adam.m." + refs[i].name, detail::sizes_of(refs[i]), staging.host(optimizer.first_moments()[i].data(), n));
    out.add("adam.v." + refs[i].name, detail::sizes_of(refs[i]), staging.host(optimizer.second_moments()[i].data(), n));
  }
  for (const auto& [key, value] : description) out.set_metadata(key, value);
  out.set_metadata("attn.format", checkpoint_format);
  out.set_metadata("attn.step", std::to_string(state.step));
  out.set_metadata("attn.adam_steps", std::to_string(optimizer.steps()));
  out.set_metadata("attn.epoch", std::to_string(state.data.epoch));
  out.set_metadata("attn.batch_index", std::to_string(state.data.index));
  out.set_metadata("attn.batches_seen", std::to_string(state.batches_seen));
  out.set_metadata("attn.seed", std::to_string(state.seed));
  out.set_metadata("attn.bad_steps_in_row", std::to_string(state.bad_steps_in_row));
  if (state.loss_scale.scale > 0) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.17g", state.loss_scale.scale);  // exact: a power of two
    out.set_metadata("attn.loss_scale", scale);
    out.set_metadata("attn.loss_scale_steps", std::to_string(state.loss_scale.finite_steps));
    out.set_metadata("attn.loss_scale_overflows", std::to_string(state.loss_scale.overflows));
  }
  out.save(path);
}

/// Loads a checkpoint written by save_checkpoint into `parameters` and `optimizer`. The file
/// is read and validated whole (checksum, every name and shape, the description) before any
/// value is copied, so a bad file leaves the model as it was.
template <class T, class Device>
training_state load_checkpoint(const std::filesystem::path& path, grad::parameter_list<T, Device>& parameters,
                               adam<T, Device>& optimizer, const model_description& description) {
  const auto file = detail::load_file(path);
  if (detail::required(file, path, "attn.format") != checkpoint_format)
    throw safetensors::format_error(path, "attn.format is '" + detail::required(file, path, "attn.format") +
                                    "', expected '" + checkpoint_format + "' (weights-only files cannot be resumed)");
  detail::check_description(file, path, description);
  const auto& refs = parameters.refs();
  for (const auto& ref : refs) {
    const auto sizes = detail::sizes_of(ref);
    for (const std::string prefix : {"model.", "adam.m.", "adam.v."}) {
      const auto& info = file.at(prefix + ref.name);
      if (info.type != safetensors::dtype_of<T>)
        throw safetensors::format_error(path, "tensor '" + prefix + ref.name + "' is " +
                                                  std::string(safetensors::dtype_name(info.type)) + ", the model is " +
                                                  std::string(safetensors::dtype_name(safetensors::dtype_of<T>)));
      if (info.shape != sizes)
        throw safetensors::format_error(path, "tensor '" + prefix + ref.name + "' has shape " +
                                        detail::shape_text(info.shape) + ", the model expects " +
                                        detail::shape_text(sizes));
    }
  }
  const std::size_t expected_tensors = 3 * refs.size();
  if (file.names().size() != expected_tensors)
    throw safetensors::format_error(path, "holds " + std::to_string(file.names().size()) +
                                    " tensors, the model and its optimizer have " + std::to_string(expected_tensors));
  training_state state;
  state.step = detail::number(file, path, "attn.step");
  state.data.epoch = static_cast<std::uint64_t>(detail::number(file, path, "attn.epoch"));
  state.data.index = static_cast<std::uint64_t>(detail::number(file, path, "attn.batch_index"));
  state.batches_seen = static_cast<std::uint64_t>(detail::number(file, path, "attn.batches_seen"));
  state.seed = static_cast<std::uint64_t>(detail::number(file, path, "attn.seed"));
  state.bad_steps_in_row = detail::number(file, path, "attn.bad_steps_in_row");
  state.loss_scale = detail::loss_scale(file, path);
  const long adam_steps = detail::number(file, path, "attn.adam_steps");

  detail::load_tensors(file, "model.", parameters);
  detail::load_tensors(file, "adam.m.", parameters, &optimizer.first_moments());
  detail::load_tensors(file, "adam.v.", parameters, &optimizer.second_moments());
  optimizer.set_steps(adam_steps);
  return state;
}

/// Writes the weights alone (an averaged model, paper §6.1), with the description.
template <class T, class Device>
void save_weights(const std::filesystem::path& path, grad::parameter_list<T, Device>& parameters,
                  const model_description& description) {
  safetensors::writer out;
  detail::host_staging<Device> staging;
  for (const auto& ref : parameters.refs())
    out.add("model." + ref.name, detail::sizes_of(ref), staging.host(static_cast<const T*>(ref.value), ref.size));
  for (const auto& [key, value] : description) out.set_metadata(key, value);
  out.set_metadata("attn.format", weights_format);
  out.save(path);
}

/// Loads the weights of a checkpoint or of a weights-only file (for translation).
template <class T, class Device>
void load_weights(const std::filesystem::path& path, grad::parameter_list<T, Device>& parameters,
                  const model_description& description) {
  const auto file = detail::load_file(path);
  const std::string format = detail::required(file, path, "attn.format");
  if (format != checkpoint_format && format != weights_format)
    throw safetensors::format_error(path, "attn.format is '" + format + "', expected '" +
                                    checkpoint_format + "' or '" + weights_format + "'");
  detail::check_description(file, path, description);
  for (const auto& ref : parameters.refs()) {
    const auto& info = file.at("model." + ref.name);
    if (info.type != safetensors::dtype_of<T>)
      throw safetensors::format_error(path, "tensor 'model." + ref.name + "' is " +
                                                std::string(safetensors::dtype_name(info.type)) + ", the model is " +
                                                std::string(safetensors::dtype_name(safetensors::dtype_of<T>)));
    if (info.shape != detail::sizes_of(ref))
      throw safetensors::format_error(path, "tensor 'model." + ref.name + "' has shape " +
                                      detail::shape_text(info.shape) + ", the model expects " +
                                      detail::shape_text(detail::sizes_of(ref)));
  }
  detail::load_tensors(file, "model.", parameters);
}

}  // namespace attn::train
