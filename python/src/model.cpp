// attn.Gpt: a checkpoint of `attn train` or a GPT-2 model in Hugging Face's layout — its
// logits, and generation one token at a time.
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "attn/gpt.hpp"
#include "attn/hf.hpp"
#include "attn/train.hpp"
#include "bindings.hpp"
#include "gpt_object.hpp"

namespace attn::python {
namespace {

using namespace pybind11::literals;

// The bytes of one token at a time (attn/__init__.py decodes them incrementally to text).
struct Generation {
  std::shared_ptr<LoadedGpt> loaded;  // keeps the model alive
  std::unique_ptr<Generator> generator;
  int64_t remaining;
  bool running = false;  // set and read under the GIL: one next() at a time, as Python's own
};

// Loads with `read` (a path -> {model, tokenizer}), the weights kept as `weights` says; the
// dtype's name is checked before anything is read.
template <class Read>
PyGpt load_with(const Read& read, const py::handle& path_like, const std::string& weights) {
  const std::string path = path_of(path_like, "path");
  const Dtype dtype = weights_dtype_from_string(weights);
  auto loaded = std::make_shared<LoadedGpt>(read(path));
  loaded->model.set_weights_dtype(dtype);
  return PyGpt{std::move(loaded)};
}

PyGpt load(const py::handle& path, const std::string& weights) {
  return load_with(
      [](const std::string& p) {
        Checkpoint c = load_checkpoint(p);
        return LoadedGpt{std::move(c.model), std::move(c.tokenizer)};
      },
      path, weights);
}

PyGpt from_hf(const py::handle& dir, const std::string& weights) {
  return load_with(
      [](const std::string& d) {
        HfGpt2 gpt2 = load_hf_gpt2(d);
        return LoadedGpt{std::move(gpt2.model), std::move(gpt2.tokenizer)};
      },
      dir, weights);
}

}  // namespace

void add_model(py::module_& m) {
  py::class_<Generation>(m, "_Generation")
      .def("__iter__", [](Generation& g) -> Generation& { return g; })
      .def("__next__", [](Generation& g) {
        if (g.running) throw py::value_error("generator already executing");
        if (g.remaining <= 0) throw py::stop_iteration();
        --g.remaining;
        int64_t id;
        g.running = true;
        try {
          py::gil_scoped_release unlocked;
          id = g.generator->next();
        } catch (...) {
          g.running = false;
          throw;
        }
        g.running = false;
        const int64_t one[] = {id};
        return py::bytes(g.loaded->tokenizer.decode(one));
      });

  py::class_<PyGpt>(m, "Gpt", R"(A GPT: trained by `attn train`, or GPT-2 from Hugging Face's files.

Gpt.load(checkpoint_dir, weights="f32") reads DIR/checkpoint.safetensors (or the file itself);
Gpt.from_hf(model_dir, weights="f32") reads config.json, model.safetensors and GPT-2's tokenizer
files from one directory (what `attn generate --model` reads). weights="bf16" keeps the
matrices in bfloat16: half the memory. logits(ids) runs the model; attention_weights(ids)
returns what every head attends to; generate(prompt, …) yields the continuation's text piece by
piece (without a prompt, GPT-2 starts after <|endoftext|>).)")
      .def_static("load", &load,
                  "A checkpoint of `attn train`: its directory or checkpoint.safetensors; "
                  "weights 'f32' or 'bf16'.",
                  "checkpoint"_a, "weights"_a = "f32")
      .def_static("from_hf", &from_hf,
                  "GPT-2 in Hugging Face's layout: a directory with config.json, "
                  "model.safetensors and GPT-2's tokenizer files; weights 'f32' or 'bf16'.",
                  "model_dir"_a, "weights"_a = "f32")
      .def_property_readonly(
          "weights", [](const PyGpt& g) { return to_string(g.loaded->model.weights_dtype()); })
      .def(
          "encode",
          [](const PyGpt& g, const std::string& text) { return g.loaded->tokenizer.encode(text); },
          "The model's tokenizer: text -> ids.", "text"_a)
      .def(
          "decode",
          [](const PyGpt& g, const std::vector<int64_t>& ids) {
            return py::bytes(g.loaded->tokenizer.decode(ids));
          },
          "ids -> bytes", "ids"_a)
      .def(
          "logits",
          [](const PyGpt& g, const std::vector<int64_t>& ids, int64_t batch) {
            Tensor logits;
            {
              py::gil_scoped_release unlocked;
              logits = g.loaded->model.logits(ids, batch);
            }
            return to_array(logits);
          },
          "ids (batch·T, row-major) -> logits (batch, T, vocab_size)", "ids"_a, "batch"_a = 1)
      .def(
          "attention_weights",
          [](const PyGpt& g, const std::vector<int64_t>& ids) {
            Tensor weights;
            {
              py::gil_scoped_release unlocked;
              weights = g.loaded->model.attention_weights(ids);
            }
            return to_array(weights);
          },
          "ids (one sequence of T) -> every layer's attention weights (n_layer, n_head, T, T)",
          "ids"_a)
      .def(
          "_generate_bytes",
          [](const PyGpt& g, const std::string& prompt, int64_t max_new_tokens, float temperature,
             int64_t top_k, float top_p, uint64_t seed, bool use_cache,
             const std::string& cache_dtype) {
            GenerateOptions o;
            o.sampling.temperature = temperature;
            o.sampling.top_k = top_k;
            o.sampling.top_p = top_p;
            o.seed = seed;
            o.use_cache = use_cache;
            o.cache_dtype = dtype_from_string(cache_dtype, "cache_dtype");
            if (max_new_tokens < 0) {
              throw py::value_error("max_new_tokens must be >= 0, got " +
                                    std::to_string(max_new_tokens));
            }
            std::vector<int64_t> ids = prompt.empty() ? g.loaded->tokenizer.default_prompt()
                                                      : g.loaded->tokenizer.encode(prompt);
            return Generation{g.loaded,
                              std::make_unique<Generator>(g.loaded->model, std::move(ids), o),
                              max_new_tokens};
          },
          "prompt"_a, "max_new_tokens"_a, "temperature"_a, "top_k"_a, "top_p"_a, "seed"_a,
          "use_cache"_a, "cache_dtype"_a = "f32")
      .def_property_readonly("vocab_size",
                             [](const PyGpt& g) { return g.loaded->model.config().vocab_size; })
      .def_property_readonly("block_size",
                             [](const PyGpt& g) { return g.loaded->model.config().block_size; });
}

}  // namespace attn::python
