// The widths a model was compiled for: what attn-train and attn-translate look a run's
// model up by (a width is a type in attn, so each set is compiled ahead of time).
#pragma once

#include <string>

namespace attn::examples {

struct model_widths {
  int d_model = 0, d_ff = 0, heads = 0, d_k = 0, d_v = 0;
  bool operator==(const model_widths&) const = default;
  std::string to_string() const {
    return "(d_model " + std::to_string(d_model) + ", d_ff " + std::to_string(d_ff) + ", h " + std::to_string(heads) +
           ", d_k " + std::to_string(d_k) + ", d_v " + std::to_string(d_v) + ")";
  }
};

template <class C>
constexpr model_widths widths_of() {
  return {int(C::d_model::extent), int(C::d_ff::extent), int(C::heads::extent), int(C::d_k::extent),
          int(C::d_v::extent)};
}

}  // namespace attn::examples
