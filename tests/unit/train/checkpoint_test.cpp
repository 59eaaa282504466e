// Training checkpoints: what is saved comes back exactly; what does not fit is refused by name.
#include <doctest/doctest.h>

#include "../scratch_dir.hpp"
#include <unistd.h>

#include <attn/cpu.hpp>
#include <attn/train/average.hpp>
#include <attn/train/checkpoint.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

using namespace attn;

namespace {

template <class Tensor>
bool same_elements(const Tensor& a, const Tensor& b) {
  return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
}

using row = dim<"row">;
using col = dim<"col">;

struct little_model {
  grad::parameter<float, shape<row, col>> weight;
  grad::parameter<float, shape<col>> bias;
  grad::parameter_list<float> list;
  train::adam<float> optimizer;

  little_model(index_t rows, float start)
      : weight(extents<shape<row, col>>(rows, 3)), bias(extents<shape<col>>(3)), list(make_list()), optimizer(list) {
    float next = start;
    for (auto& p : list.refs())
      for (index_t i = 0; i < p.size; ++i) {
        p.value[i] = next;
        p.grad[i] = next / 10;
        next += 1;
      }
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

TEST_CASE("train: a checkpoint brings back weights, Adam's moments and the state exactly") {
  attn::test::scratch_dir dir("checkpoint");
  little_model saved(2, 1.5f);
  saved.optimizer.step(1e-2);
  saved.optimizer.step(1e-2);
  train::training_state state{7, {3, 11}, 42, 1234, 1, {0x1p-3, 17, 4}};
  const auto file = dir.path / "checkpoint.safetensors";
  train::save_checkpoint(file, saved.list, saved.optimizer, state, described);

  little_model loaded(2, -100.0f);
  const auto back = train::load_checkpoint(file, loaded.list, loaded.optimizer, described);
  CHECK(back.step == 7);
  CHECK(back.data.epoch == 3);
  CHECK(back.data.index == 11);
  CHECK(back.batches_seen == 42);
  CHECK(back.seed == 1234);
  CHECK(back.bad_steps_in_row == 1);
  CHECK(back.loss_scale.scale == 0.125);  // exactly: written with every digit
  CHECK(back.loss_scale.finite_steps == 17);
  CHECK(back.loss_scale.overflows == 4);
  CHECK(loaded.optimizer.steps() == 2);
  for (std::size_t p = 0; p < 2; ++p) {
    const auto& a = saved.list.refs()[p];
    const auto& b = loaded.list.refs()[p];
    for (index_t i = 0; i < a.size; ++i) CHECK(a.value[i] == b.value[i]);
    CHECK(same_elements(saved.optimizer.first_moments()[p], loaded.optimizer.first_moments()[p]));
    CHECK(same_elements(saved.optimizer.second_moments()[p], loaded.optimizer.second_moments()[p]));
  }
  // Given the same gradients (a checkpoint is taken between steps, when there are none), both go on identically.
  for (std::size_t p = 0; p < 2; ++p)
    std::copy_n(saved.list.refs()[p].grad, saved.list.refs()[p].size, loaded.list.refs()[p].grad);
  saved.optimizer.step(1e-2);
  loaded.optimizer.step(1e-2);
  CHECK(saved.list.refs()[0].value[5] == loaded.list.refs()[0].value[5]);
}

TEST_CASE("train: a checkpoint without a loss scale (fp32 and bf16 runs) loads with none") {
  attn::test::scratch_dir dir("checkpoint");
  little_model saved(2, 1.5f);
  const auto file = dir.path / "checkpoint.safetensors";
  train::save_checkpoint(file, saved.list, saved.optimizer, train::training_state{}, described);
  little_model loaded(2, -100.0f);
  CHECK(train::load_checkpoint(file, loaded.list, loaded.optimizer, described).loss_scale.scale == 0);
}

TEST_CASE("train: checkpoints of another model, weights-only files and damaged files are refused, the model untouched") {
  attn::test::scratch_dir dir("checkpoint");
  little_model saved(2, 1.0f);
  const auto file = dir.path / "checkpoint.safetensors";
  train::save_checkpoint(file, saved.list, saved.optimizer, {}, described);

  little_model other(2, -1.0f);
  auto untouched = [&] { return other.list.refs()[0].value[0] == -1.0f && other.optimizer.steps() == 0; };
  CHECK(message_of([&] {
          train::load_checkpoint(file, other.list, other.optimizer, {{"model.d_model", "4"}, {"model.layers", "1"}});
        }) == file.string() + ": written for model.d_model = 3, but this run has model.d_model = 4");
  CHECK(untouched());

  little_model wider(3, -1.0f);
  CHECK(message_of([&] { train::load_checkpoint(file, wider.list, wider.optimizer, described); }) ==
        file.string() + ": tensor 'model.weight' has shape [2, 3], the model expects [3, 3]");

  const auto weights = dir.path / "weights.safetensors";
  train::save_weights(weights, saved.list, described);
  CHECK(message_of([&] { train::load_checkpoint(weights, other.list, other.optimizer, described); })
            .find("weights-only files cannot be resumed") != std::string::npos);
  train::load_weights(weights, other.list, described);  // but translation may load them
  CHECK(other.list.refs()[1].value[2] == saved.list.refs()[1].value[2]);

  // Another tool's rewrite keeps no checksum: refused by every loader, with what to do about it.
  const auto rewritten = dir.path / "rewritten.safetensors";
  {
    std::string bytes = attn::test::file_contents(file);
    const std::string entry = "\"attn.checksum\":\"";
    const std::size_t at = bytes.find(entry);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, entry.size() + 16 + 2, entry.size() + 16 + 2, ' ');  // the entry and its '",' blanked
    std::ofstream(rewritten, std::ios::binary) << bytes;
  }
  const std::string no_checksum = rewritten.string() +
                                  ": no attn.checksum in the metadata: attn writes one into every checkpoint, so "
                                  "another tool wrote or rewrote this file; to load it, add one (python3 "
                                  "tests/train/safetensors_read.py --add-checksum FILE OUT; docs/checkpoints.md)";
  const float loaded_before = other.list.refs()[0].value[0];
  CHECK(message_of([&] { train::load_checkpoint(rewritten, other.list, other.optimizer, described); }) == no_checksum);
  CHECK(message_of([&] { train::load_weights(rewritten, other.list, described); }) == no_checksum);
  CHECK(message_of([&] { (void)train::average_checkpoints({rewritten}); }) == no_checksum);
  CHECK(other.list.refs()[0].value[0] == loaded_before);

  little_model fresh(2, -1.0f);
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);
  CHECK_THROWS_AS(train::load_checkpoint(file, fresh.list, fresh.optimizer, described), train::safetensors::format_error);
  CHECK(fresh.list.refs()[0].value[0] == -1.0f);
}
