// attn.BpeTokenizer, attn.Gpt2Tokenizer, attn.train_bpe, attn.heatmap, attn.heatmap_png /
// heatmap_svg, attn.explorer_html.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "attn/files.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "attn/tokenizer.hpp"
#include "attn/viz.hpp"
#include "bindings.hpp"

namespace attn::python {
namespace {

using namespace pybind11::literals;

// str (UTF-8) or bytes, as bytes.
std::string text_bytes(const py::handle& text, const char* name) {
  if (py::isinstance<py::bytes>(text)) return text.cast<std::string>();
  if (py::isinstance<py::str>(text)) return utf8_of(text, name);
  throw py::type_error(std::string(name) + " must be str or bytes");
}

// What both tokenizer classes offer: encode, encode_parallel, encode_batch, decode,
// decode_bytes, tokens and vocab_size.
template <class T>
void add_tokenizer_methods(py::class_<T>& c) {
  c.def(
       "encode",
       [](const T& t, const py::handle& text) {
         const std::string bytes = text_bytes(text, "text");
         py::gil_scoped_release unlocked;
         return t.encode(bytes);
       },
       "text (str or bytes) -> ids", "text"_a)
      .def(
          "encode_parallel",
          [](const T& t, const py::handle& text) {
            const std::string bytes = text_bytes(text, "text");
            py::gil_scoped_release unlocked;
            return t.encode_parallel(bytes);
          },
          "One long text on the library's threads, cut where encoding the parts gives the ids "
          "of the whole: the same ids as encode.",
          "text"_a)
      .def(
          "encode_batch",
          [](const T& t, const std::vector<std::string>& texts) {
            py::gil_scoped_release unlocked;
            return t.encode_batch(texts);
          },
          "Several texts at once, spread over the threads.", "texts"_a)
      .def(
          "decode",
          [](const T& t, const std::vector<int64_t>& ids) {
            const std::string bytes = t.decode(ids);
            return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(
                bytes.data(), static_cast<py::ssize_t>(bytes.size()), "replace"));
          },
          "ids -> str (bytes that are not UTF-8 become U+FFFD; decode_bytes gives them exactly)",
          "ids"_a)
      .def(
          "decode_bytes",
          [](const T& t, const std::vector<int64_t>& ids) { return py::bytes(t.decode(ids)); },
          "ids -> the exact bytes", "ids"_a)
      .def(
          "tokens",
          [](const T& t, const std::vector<int64_t>& ids) {
            std::vector<std::string> shown;
            for (int64_t id : ids) shown.push_back(t.display(id));
            return shown;
          },
          "The tokens of ids as the tokenizer displays them (a space as '▁' or 'Ġ').", "ids"_a)
      .def_property_readonly("vocab_size", &T::vocab_size);
}

BpeTokenizer train(const py::handle& corpus, int64_t vocab_size, int64_t min_frequency,
                   bool byte_level, const std::vector<std::string>& special_tokens) {
  BpeOptions o;
  o.vocab_size = vocab_size;
  o.min_frequency = min_frequency;
  o.byte_level = byte_level;
  o.special_tokens = special_tokens;
  const std::string text = corpus_text(corpus);
  py::gil_scoped_release unlocked;
  return BpeTokenizer::train(text, o);
}

}  // namespace

std::string corpus_text(const py::handle& corpus) {
  if (py::isinstance<py::bytes>(corpus)) return corpus.cast<std::string>();
  if (py::isinstance<py::str>(corpus)) return utf8_of(corpus, "corpus");
  if (py::hasattr(corpus, "__fspath__")) {
    return read_whole_file(path_of(corpus, "corpus"), kMaxCorpusBytes);
  }
  if (py::isinstance<py::list>(corpus) || py::isinstance<py::tuple>(corpus)) {
    std::string text;
    for (const py::handle& item : corpus) {
      if (!text.empty()) text += '\n';
      text += corpus_text(item);
    }
    return text;
  }
  throw py::type_error("corpus must be a str, bytes, a list of them or a path (os.PathLike)");
}

void add_text(py::module_& m) {
  py::class_<BpeTokenizer> bpe(m, "BpeTokenizer", R"(A byte-pair-encoding tokenizer.

BpeTokenizer.train(corpus, vocab_size=512, min_frequency=2, byte_level=False, special_tokens=())
learns one; encode / encode_batch / decode / tokens use it; save / load keep it as JSON (the
file `attn bpe train` writes). Byte level: decode(encode(b)) == b for any bytes b.)");
  bpe.def_static("train", &train, "corpus"_a, "vocab_size"_a = 512, "min_frequency"_a = 2,
                 "byte_level"_a = false, "special_tokens"_a = std::vector<std::string>{},
                 "Learns a tokenizer from a str, bytes, a list of them, or a file (a path).")
      .def_static(
          "load", [](const py::handle& path) { return BpeTokenizer::load(path_of(path, "path")); },
          "path"_a)
      .def(
          "save",
          [](const BpeTokenizer& t, const py::handle& path) { t.save(path_of(path, "path")); },
          "path"_a);
  add_tokenizer_methods(bpe);
  py::class_<Gpt2Tokenizer> gpt2(m, "Gpt2Tokenizer", R"(GPT-2's byte-level BPE, with GPT-2's ids.

Gpt2Tokenizer.load(path) reads a directory holding tokenizer.json, vocab.json + merges.txt or
encoder.json + vocab.bpe (the first found), or one of those files; encode / encode_batch /
decode / tokens use it. <|endoftext|> in a text is the special token.)");
  gpt2.def_static(
          "load", [](const py::handle& path) { return Gpt2Tokenizer::load(path_of(path, "path")); },
          "A directory with GPT-2's tokenizer files, or one of them.", "path"_a)
      .def(
          "special_id",
          [](const Gpt2Tokenizer& t, const std::string& token) { return t.special_id(token); },
          "The id of a special token such as '<|endoftext|>'; None when there is none.", "token"_a);
  add_tokenizer_methods(gpt2);

  m.def(
      "train_bpe",
      [](const py::handle& corpus, int64_t vocab_size, int64_t min_frequency) {
        return train(corpus, vocab_size, min_frequency, false, {});
      },
      "train_bpe(corpus, vocab_size=80, min_frequency=2): the walk-through's character-level BPE.",
      "corpus"_a, "vocab_size"_a = 80, "min_frequency"_a = 2);

  m.def(
      "heatmap",
      [](const py::handle& weights, const std::optional<std::vector<std::string>>& tokens,
         const std::string& scale, int64_t max_width) {
        HeatmapOptions o;
        const Tensor w = to_tensor(weights, "weights");
        if (tokens) {
          o.column_labels = *tokens;
          if (w.rank() == 2 && w.dim(0) <= static_cast<int64_t>(tokens->size())) {
            o.row_labels.assign(tokens->end() - w.dim(0), tokens->end());
          }
        }
        o.scale = heatmap_scale_from_string(scale);
        o.max_width = max_width;
        return heatmap_ascii(w, o);
      },
      R"(heatmap(weights, tokens=None, scale="global", max_width=0) -> str

The ASCII heat map of a (Tq, Tk) weights matrix: rows = queries, columns = keys, token labels
on both axes (the queries are the last Tq tokens). scale: global, row or absolute.
max_width > 0: fit that many terminal columns, down-sampling a wider map.)",
      "weights"_a, "tokens"_a = py::none(), "scale"_a = "global", "max_width"_a = 0);

  // The pictures: tokens label the keys, and the queries are the last Tq of them.
  const auto picture =
      [](const py::handle& weights, const std::optional<std::vector<std::string>>& tokens,
         const std::string& scale, const std::string& title, int64_t max_cells, bool png) {
        const Tensor w = to_tensor(weights, "weights");
        HeatmapPictureOptions o;
        if (tokens && w.rank() >= 2 && w.dim(-2) <= static_cast<int64_t>(tokens->size())) {
          o.column_labels = *tokens;
          o.row_labels.assign(tokens->end() - w.dim(-2), tokens->end());
        } else if (tokens) {
          o.column_labels = *tokens;  // a count that does not fit is reported by the writer
        }
        o.scale = heatmap_scale_from_string(scale);
        o.title = title;
        o.max_cells = max_cells;
        std::string bytes;
        {
          py::gil_scoped_release unlocked;
          bytes = png ? heatmap_png(w, o) : heatmap_svg(w, o);
        }
        return py::bytes(bytes);
      };
  m.def(
      "heatmap_png",
      [picture](const py::handle& weights, const std::optional<std::vector<std::string>>& tokens,
                const std::string& scale, const std::string& title, int64_t max_cells) {
        return picture(weights, tokens, scale, title, max_cells, true);
      },
      R"(heatmap_png(weights, tokens=None, scale="global", title="", max_cells=128) -> bytes

A PNG picture of (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk) weights: one panel, a row of heads, or
a grid with a row per layer; token labels, a viridis colour bar, block-max down-sampling past
max_cells. Write it with open(path, "wb").write(...).)",
      "weights"_a, "tokens"_a = py::none(), "scale"_a = "global", "title"_a = "",
      "max_cells"_a = 128);
  m.def(
      "heatmap_svg",
      [picture](const py::handle& weights, const std::optional<std::vector<std::string>>& tokens,
                const std::string& scale, const std::string& title, int64_t max_cells) {
        return picture(weights, tokens, scale, title, max_cells, false);
      },
      R"(heatmap_svg(weights, tokens=None, scale="global", title="", max_cells=128) -> bytes

The same picture as heatmap_png, as an SVG document whose labels are text.)",
      "weights"_a, "tokens"_a = py::none(), "scale"_a = "global", "title"_a = "",
      "max_cells"_a = 128);
  m.def(
      "explorer_html",
      [](const py::handle& weights, const std::vector<std::string>& tokens,
         const std::string& title, const std::string& subtitle) {
        const Tensor w = to_tensor(weights, "weights");
        ExplorerOptions o;
        o.title = title;
        o.subtitle = subtitle;
        return explorer_html(w, tokens, o);
      },
      R"(explorer_html(weights, tokens, title="Attention", subtitle="") -> str

The attention explorer: one self-contained HTML page (nothing fetched; it opens from a file://
URL) for (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk) weights and one token per key.)",
      "weights"_a, "tokens"_a, "title"_a = "Attention", "subtitle"_a = "");
}

}  // namespace attn::python
