#include "heatmap.hpp"

#include <png.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace attn::translator {

void write_heatmap_png(const std::filesystem::path& path, const std::vector<weight_grid>& heads, int cell) {
  if (heads.empty()) throw std::invalid_argument("write_heatmap_png: no heads");
  const int rows = heads.front().rows, columns = heads.front().columns;
  const int per_row = std::min<int>(4, int(heads.size()));
  const int grid_rows = (int(heads.size()) + per_row - 1) / per_row;
  const int gap = 4;
  const int tile_width = columns * cell, tile_height = rows * cell;
  const int width = per_row * tile_width + (per_row + 1) * gap;
  const int height = grid_rows * tile_height + (grid_rows + 1) * gap;
  std::vector<std::uint8_t> pixels(std::size_t(width) * std::size_t(height) * 3, 160);  // gray background

  for (std::size_t h = 0; h < heads.size(); ++h) {
    const auto& grid = heads[h];
    if (grid.rows != rows || grid.columns != columns) throw std::invalid_argument("write_heatmap_png: heads differ in size");
    const int left = gap + int(h % std::size_t(per_row)) * (tile_width + gap);
    const int top = gap + int(h / std::size_t(per_row)) * (tile_height + gap);
    for (int y = 0; y < tile_height; ++y) {
      for (int x = 0; x < tile_width; ++x) {
        const float w = std::clamp(grid.values[std::size_t((y / cell) * columns + x / cell)], 0.0f, 1.0f);
        std::uint8_t* p = &pixels[(std::size_t(top + y) * std::size_t(width) + std::size_t(left + x)) * 3];
        // White to (8, 48, 107), the dark end of a sequential blue scale.
        p[0] = std::uint8_t(255 - w * (255 - 8));
        p[1] = std::uint8_t(255 - w * (255 - 48));
        p[2] = std::uint8_t(255 - w * (255 - 107));
      }
    }
  }

  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = png_uint_32(width);
  image.height = png_uint_32(height);
  image.format = PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr))
    throw std::runtime_error(path.string() + ": cannot write PNG: " + image.message);
}

}  // namespace attn::translator
