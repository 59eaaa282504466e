// Checkpoint averaging (paper §6.1): the mean of k checkpoints against a plain loop; files of
// another model, and weights that do not fit the model, refused by name.
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"

#include <attn/cpu.hpp>
#include <attn/train/average.hpp>
#include <filesystem>
#include <string>
#include <vector>

using namespace attn;

namespace {

using row = dim<"row">;
using col = dim<"col">;

/// Two parameters whose values are start, start + step, start + 2 step, ... in list order.
struct little_model {
  grad::parameter<float, shape<row, col>> weight;
  grad::parameter<float, shape<col>> bias;
  grad::parameter_list<float> list;
  train::adam<float> optimizer;

  little_model(index_t rows, float start, float step)
      : weight(extents<shape<row, col>>(rows, 3)), bias(extents<shape<col>>(3)), list(make_list()), optimizer(list) {
    float next = start;
    for (auto& p : list.refs())
      for (index_t i = 0; i < p.size; ++i, next += step) p.value[i] = next;
  }
  grad::parameter_list<float> make_list() {
    grad::parameter_list<float> l;
    l.add("weight", weight);
    l.add("bias", bias);
    return l;
  }
};

const train::model_description described{{"model.d_model", "3"}, {"model.layers", "1"}};

std::string message_of(auto&& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("train: averaging checkpoints gives the mean of their weights and keeps the model's metadata") {
  attn::test::scratch_dir dir("average");
  const float starts[] = {0.1f, -3.7f, 12.25f};
  const float steps[] = {0.3f, 1.1f, -0.7f};
  std::vector<std::filesystem::path> files;
  for (int k = 0; k < 3; ++k) {
    little_model m(2, starts[k], steps[k]);
    files.push_back(dir.path / ("checkpoint-" + std::to_string(k) + ".safetensors"));
    train::save_checkpoint(files.back(), m.list, m.optimizer, {}, described);
  }

  const auto averaged = train::average_checkpoints(files);
  CHECK(averaged.names == std::vector<std::string>{"model.weight", "model.bias"});
  CHECK(averaged.shapes == std::vector<std::vector<std::int64_t>>{{2, 3}, {3}});
  CHECK(averaged.description == described);
  CHECK(averaged.metadata("model.layers") == "1");
  CHECK(message_of([&] { averaged.metadata("model.heads"); }) ==
        files.front().string() + ": has no metadata 'model.heads': not an attn checkpoint");
  CHECK(averaged.sources == files);
  // The plain reference: each value's mean over the three models, summed in double.
  const little_model saved[] = {{2, starts[0], steps[0]}, {2, starts[1], steps[1]}, {2, starts[2], steps[2]}};
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < averaged.values[t].size(); ++i) {
      double sum = 0;
      for (const auto& m : saved) sum += double(m.list.refs()[t].value[i]);
      CHECK(averaged.values[t][i] == float(sum / 3));
    }

  // Saved as a weights-only file, it loads into the model like any weights file.
  const auto out = dir.path / "averaged.safetensors";
  train::save_averaged(out, averaged);
  little_model loaded(2, -1.0f, 0.0f);
  train::load_weights(out, loaded.list, described);
  little_model direct(2, -1.0f, 0.0f);
  train::load_averaged(averaged, direct.list);
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < averaged.values[t].size(); ++i) {
      CHECK(loaded.list.refs()[t].value[i] == averaged.values[t][i]);
      CHECK(direct.list.refs()[t].value[i] == averaged.values[t][i]);
    }
  // The mean of one file is that file.
  const auto one = train::average_checkpoints({files[1]});
  little_model original(2, starts[1], steps[1]);
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < one.values[t].size(); ++i) CHECK(one.values[t][i] == original.list.refs()[t].value[i]);
}

TEST_CASE("train: averaging refuses files of another model, and weights that do not fit the model") {
  attn::test::scratch_dir dir("average");
  little_model two_rows(2, 1.0f, 1.0f);
  little_model three_rows(3, 1.0f, 1.0f);
  const auto a = dir.path / "a.safetensors", other = dir.path / "other.safetensors", wider = dir.path / "wider.safetensors";
  train::save_checkpoint(a, two_rows.list, two_rows.optimizer, {}, described);
  train::save_checkpoint(other, two_rows.list, two_rows.optimizer, {}, {{"model.d_model", "4"}, {"model.layers", "1"}});
  train::save_checkpoint(wider, three_rows.list, three_rows.optimizer, {}, described);

  CHECK_THROWS_AS(train::average_checkpoints({}), std::invalid_argument);
  CHECK(message_of([&] { train::average_checkpoints({a, other}); }) ==
        other.string() + ": belongs to another model than " + a.string() + " (its model.* metadata differ)");
  CHECK(message_of([&] { train::average_checkpoints({a, wider}); }) ==
        wider.string() + ": tensor 'model.weight' differs in type or shape from " + a.string());

  const auto averaged = train::average_checkpoints({a});
  CHECK(message_of([&] { train::load_averaged(averaged, three_rows.list); }) ==
        a.string() + ": tensor 'model.weight' has shape [2, 3], the model expects [3, 3]");
  grad::parameter<float, shape<col>> bias(extents<shape<col>>(3));
  grad::parameter_list<float> only_bias;
  only_bias.add("bias", bias);
  CHECK(message_of([&] { train::load_averaged(averaged, only_bias); }) ==
        a.string() + ": holds 2 model tensors, the model has 1");
  grad::parameter_list<float> renamed;
  renamed.add("weight", two_rows.weight);
  renamed.add("offset", two_rows.bias);
  CHECK(message_of([&] { train::load_averaged(averaged, renamed); }) == a.string() + ": has no tensor 'model.offset'");
}
