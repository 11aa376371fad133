// The explorer page: the template of src/viz/explorer/ with the weights embedded as base64 of
// their float32 bytes (exact values, 5⅓ characters each, decoded by the page with atob), the
// tokens and the colour map as JSON.
#include <cmath>
#include <nlohmann/json.hpp>
#include <span>

#include "attn/error.hpp"
#include "attn/viz.hpp"
#include "src/viz/canvas.hpp"
#include "src/viz/page_assets.hpp"
#include "src/viz/page_template.hpp"

namespace attn {
namespace {

constexpr int64_t kMaxWeights = int64_t{1} << 24;

std::string base64(const unsigned char* bytes, size_t n) {
  static const char* const kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t chunk = static_cast<uint32_t>(bytes[i]) << 16 |
                           (i + 1 < n ? static_cast<uint32_t>(bytes[i + 1]) << 8 : 0) |
                           (i + 2 < n ? bytes[i + 2] : 0);
    out += kAlphabet[chunk >> 18 & 63];
    out += kAlphabet[chunk >> 12 & 63];
    out += i + 1 < n ? kAlphabet[chunk >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

// w4: contiguous (L, H, Tq, Tk).
std::string page_data(const Tensor& w4, const std::vector<std::string>& tokens,
                      const ExplorerOptions& options) {
  nlohmann::json colormap = nlohmann::json::array();
  for (const Rgb c : viridis()) colormap.push_back(viz::hex_colour(c));
  nlohmann::json shown = nlohmann::json::array();
  for (const std::string& t : tokens) shown.push_back(viz::valid_utf8(t));
  const nlohmann::json data = {
      {"shape", w4.shape()},
      {"tokens", shown},
      {"layer_name", options.grid_row_name},
      {"colormap", colormap},
      {"weights", base64(reinterpret_cast<const unsigned char*>(w4.data()),
                         sizeof(float) * static_cast<size_t>(w4.numel()))}};
  return viz::script_safe(data.dump());
}

// (Tq, Tk) and (H, Tq, Tk) as one layer of heads, (L, H, Tq, Tk) as it is.
Tensor as_layers_of_heads(const Tensor& weights) {
  Shape shape = weights.shape();
  while (shape.size() < 4) shape.insert(shape.begin(), 1);
  return weights.contiguous().reshape(shape);
}

}  // namespace

std::string explorer_html(const Tensor& weights, const std::vector<std::string>& tokens,
                          const ExplorerOptions& options) {
  ATTN_CHECK(weights.defined() && weights.rank() >= 2 && weights.rank() <= 4,
             "explorer: weights must be (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk), got ",
             weights.defined() ? weights.shape_string() : "undefined");
  const int64_t tq = weights.dim(-2), tk = weights.dim(-1);
  ATTN_CHECK(static_cast<int64_t>(tokens.size()) == tk, "explorer: ", tokens.size(), " tokens for ",
             tk, " keys");
  ATTN_CHECK(tq <= tk, "explorer: the queries must be the last of the keys (Tq <= Tk), got ",
             weights.shape_string());
  ATTN_CHECK(weights.numel() <= kMaxWeights, "explorer: ", weights.numel(),
             " weights are too many for one page (at most ", kMaxWeights,
             "): a shorter text or fewer layers");
  const Tensor w4 = as_layers_of_heads(weights);
  for (const float v : std::span<const float>(w4.data(), static_cast<size_t>(w4.numel()))) {
    ATTN_CHECK(std::isfinite(v), "explorer: the weights hold ", v);
  }
  return viz::fill_template(viz::kExplorerHtml, {{"TITLE", viz::escape_markup(options.title)},
                                                 {"SUBTITLE", viz::escape_markup(options.subtitle)},
                                                 {"CSS", viz::kExplorerCss},
                                                 {"JS", viz::kExplorerJs},
                                                 {"DATA", page_data(w4, tokens, options)}});
}

}  // namespace attn
