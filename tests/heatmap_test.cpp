// ASCII heat map: the ramp, the labels, the scale line and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "attn/viz.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Heatmap, MapsValuesOntoTheRamp) {
  const Tensor m = Tensor::from_values({2, 3}, {0.0f, 0.5f, 1.0f, 0.125f, 0.875f, 0.25f});
  const auto out = lines(heatmap_ascii(m));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], "  ▄▄██");
  EXPECT_EQ(out[1], "▁▁▇▇▂▂");
  EXPECT_EQ(out[2], "scale: ' ' = 0 … '█' = 1");
}

TEST(Heatmap, ScalesToTheLargestValueUnlessTold) {
  const Tensor m = Tensor::from_values({1, 2}, {0.1f, 0.2f});
  EXPECT_EQ(lines(heatmap_ascii(m))[0], "▄▄██");
  HeatmapOptions absolute;
  absolute.vmax = 1.0f;
  EXPECT_EQ(lines(heatmap_ascii(m, absolute))[0], "▁▁▂▂");
}

TEST(Heatmap, RowAndAbsoluteScales) {
  // A causal map: row 0 is all on its first key; row 1 splits 0.5 / 0.5.
  const Tensor m = Tensor::from_values({2, 2}, {1.0f, 0.0f, 0.5f, 0.5f});
  HeatmapOptions row;
  row.scale = HeatmapScale::kRow;
  const auto by_row = lines(heatmap_ascii(m, row));
  EXPECT_EQ(by_row[1], "████");  // each row to its own largest
  EXPECT_EQ(by_row[2], "scale: per row, ' ' = 0 … '█' = the row's largest");
  HeatmapOptions absolute;
  absolute.scale = HeatmapScale::kAbsolute;
  EXPECT_EQ(lines(heatmap_ascii(Tensor::from_values({1, 2}, {0.1f, 0.2f}), absolute))[0], "▁▁▂▂");
  EXPECT_EQ(heatmap_scale_from_string("row"), HeatmapScale::kRow);
  EXPECT_TRUE(testing::ThrowsWith([] { heatmap_scale_from_string("log"); },
                                  "scale must be global, row or absolute, got 'log'"));
}

// 10 × 10 identity into a 9-column terminal (4 cells): factor 3, a 4 × 4 map whose diagonal
// survives (each cell the largest of its block), labels the first of each block, and a note.
TEST(Heatmap, DownSamplesWideMatricesKeepingTheirPeaks) {
  Tensor eye({10, 10});
  for (int64_t i = 0; i < 10; ++i) eye.at({i, i}) = 1.0f;
  HeatmapOptions o;
  o.max_width = 9;  // 4 cells of 2 characters, the last column left free
  for (int i = 0; i < 10; ++i)
    o.column_labels.push_back(std::string(1, static_cast<char>('a' + i)));
  const auto out = lines(heatmap_ascii(eye, o));
  ASSERT_EQ(out.size(), 1u + 4u + 2u);
  EXPECT_EQ(out[0], "a d g j");
  EXPECT_EQ(out[1], "██      ");
  EXPECT_EQ(out[4], "      ██");
  EXPECT_EQ(out[6],
            "down-sampled 3×: each cell is the largest of a 3 × 3 block of the 10 × 10 weights");
  o.max_width = 21;  // fits: unchanged, no note
  EXPECT_EQ(lines(heatmap_ascii(eye, o)).size(), 1u + 10u + 1u);
}

TEST(Heatmap, LabelsRowsAndColumns) {
  HeatmapOptions o;
  o.row_labels = {"a", "über"};
  o.column_labels = {"xy", "z"};
  const auto out = lines(heatmap_ascii(Tensor::from_values({2, 2}, {1, 0, 0.5f, 0.5f}), o));
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0], "     x z");
  EXPECT_EQ(out[1], "     y");
  EXPECT_EQ(out[2], "a    ██  ");
  EXPECT_EQ(out[3], "über ▄▄▄▄");
}

TEST(Heatmap, Errors) {
  EXPECT_TRUE(testing::ThrowsWith(
      [] {
        heatmap_ascii(Tensor({2, 2, 2}));
      },
      "must be a 2-D matrix, got (2, 2, 2)"));
  HeatmapOptions o;
  o.row_labels = {"a"};
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        heatmap_ascii(Tensor({2, 2}), o);
      },
      "1 row labels for 2 rows"));
  EXPECT_TRUE(testing::ThrowsWith(
      [] {
        heatmap_ascii(Tensor::full({1, 1}, std::nanf("")));
      },
      "holds nan"));
}

}  // namespace
}  // namespace attn
