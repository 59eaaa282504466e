// Attention pictures (the paper's appendix figures): a PNG of the weights of every head of one
// layer, written with libpng.
#pragma once

#include <filesystem>
#include <vector>

namespace attn::translator {

/// One head's weights: rows (target positions) × columns (source positions), each in [0, 1].
struct weight_grid {
  int rows = 0, columns = 0;
  std::vector<float> values;  // row-major
};

/// Writes the heads side by side (in rows of at most 4), each weight a `cell` × `cell` square
/// from white (0) to dark blue (1), the heads parted by gray lines. Throws on failure.
void write_heatmap_png(const std::filesystem::path& path, const std::vector<weight_grid>& heads, int cell = 12);

}  // namespace attn::translator
