// Checkpoint averaging (paper §6.1: "a single model obtained by averaging the last 5
// checkpoints"): the mean of the weights of k checkpoints, read one file at a time.
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../core/transfer.hpp"
#include "../grad/parameter.hpp"
#include "checkpoint.hpp"
#include "safetensors.hpp"

namespace attn::train {

/// The mean of the model.* tensors of some checkpoints, with the model.* metadata they share.
struct averaged_weights {
  std::vector<std::string> names;  // "model.encoder.layer.0.ffn.inner.weight", ...
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<float>> values;
  model_description description;  // every "model.*" metadata key
  std::vector<std::filesystem::path> sources;

  /// The value of metadata `key`; format_error naming the files when it is missing.
  const std::string& metadata(const std::string& key) const {
    const auto found = description.find(key);
    if (found == description.end())
      throw safetensors::format_error(sources.front(), "has no metadata '" + key + "': not an attn checkpoint");
    return found->second;
  }
};

namespace detail {
inline model_description model_metadata(const safetensors::file& file) {
  model_description description;
  for (const auto& [key, value] : file.metadata())
    if (key.starts_with("model.")) description.emplace(key, value);
  return description;
}
}  // namespace detail

/// Averages the checkpoints (or weights files) at `paths`. One file is in memory at a time
/// (a big model's checkpoint with its Adam moments is 2.6 GB); sums are kept in double, so the
/// mean of k float checkpoints is exact to float precision, and the mean of one is the file.
inline averaged_weights average_checkpoints(const std::vector<std::filesystem::path>& paths) {
  if (paths.empty()) throw std::invalid_argument("average_checkpoints: no checkpoints given");
  averaged_weights result;
  std::vector<std::vector<double>> sums;
  for (const auto& path : paths) {
    const auto file = detail::load_file(path);
    if (result.names.empty()) {
      for (const auto& name : file.names())
        if (name.starts_with("model.")) result.names.push_back(name);
      if (result.names.empty()) throw safetensors::format_error(path, "holds no model.* tensors: not an attn checkpoint");
      result.description = detail::model_metadata(file);
      for (const auto& name : result.names) {
        result.shapes.push_back(file.at(name).shape);
        sums.emplace_back(file.at(name).bytes / sizeof(float), 0.0);
      }
    } else if (detail::model_metadata(file) != result.description) {
      throw safetensors::format_error(path, "belongs to another model than " + paths.front().string() +
                                                " (its model.* metadata differ)");
    }
    for (std::size_t t = 0; t < result.names.size(); ++t) {
      if (!file.contains(result.names[t]))
        throw safetensors::format_error(path, "has no tensor '" + result.names[t] + "'");
      const auto& info = file.at(result.names[t]);
      if (info.type != safetensors::dtype::f32 || info.shape != result.shapes[t])
        throw safetensors::format_error(path, "tensor '" + result.names[t] + "' differs in type or shape from " +
                                                  paths.front().string());
      const auto values = file.values<float>(result.names[t]);
      for (std::size_t i = 0; i < values.size(); ++i) sums[t][i] += values[i];
    }
    result.sources.push_back(path);
  }
  for (const auto& sum : sums) {
    auto& mean = result.values.emplace_back(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = float(sum[i] / double(paths.size()));
  }
  return result;
}

/// Writes averaged weights as a weights-only file that translation and load_weights read.
inline void save_averaged(const std::filesystem::path& path, const averaged_weights& weights) {
  safetensors::writer out;
  for (std::size_t t = 0; t < weights.names.size(); ++t) out.add(weights.names[t], weights.shapes[t], weights.values[t].data());
  for (const auto& [key, value] : weights.description) out.set_metadata(key, value);
  out.set_metadata("attn.format", weights_format);
  std::string sources;
  for (const auto& source : weights.sources) sources += (sources.empty() ? "" : ",") + source.filename().string();
  out.set_metadata("attn.averaged_from", sources);
  out.save(path);
}

/// Copies averaged weights into a model's parameters; every parameter must be there with its
/// shape, and nothing else may be.
template <class Device>
void load_averaged(const averaged_weights& weights, grad::parameter_list<float, Device>& parameters) {
  const auto& origin = weights.sources.front();
  if (weights.names.size() != parameters.size())
    throw safetensors::format_error(origin, "holds " + std::to_string(weights.names.size()) +
                                                " model tensors, the model has " + std::to_string(parameters.size()));
  for (const auto& ref : parameters.refs()) {
    const auto at = std::find(weights.names.begin(), weights.names.end(), "model." + ref.name);
    if (at == weights.names.end()) throw safetensors::format_error(origin, "has no tensor 'model." + ref.name + "'");
    const auto t = std::size_t(at - weights.names.begin());
    if (weights.shapes[t] != detail::sizes_of(ref))
      throw safetensors::format_error(origin, "tensor 'model." + ref.name + "' has shape " +
                                                  detail::shape_text(weights.shapes[t]) + ", the model expects " +
                                                  detail::shape_text(detail::sizes_of(ref)));
    copy_from_host<Device>(ref.value, std::span<const float>(weights.values[t]));
  }
}

}  // namespace attn::train
