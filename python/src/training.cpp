// attn.train: the library's training run (attn/training_run.hpp) from Python. The run holds no
// GIL; its callbacks take it. Ctrl-C is seen between steps: the run saves, then
// KeyboardInterrupt is raised. The settings' defaults are the C++ structs' own.
#include <pybind11/stl.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/train.hpp"
#include "attn/training_run.hpp"
#include "bindings.hpp"
#include "gpt_object.hpp"

namespace attn::python {
namespace {

namespace fs = std::filesystem;
namespace py = pybind11;
using namespace pybind11::literals;

// Takes kwargs[name] into `field` when it is there, removing it so that what remains is unknown.
template <class T>
bool take(py::dict& kwargs, const char* name, T& field) {
  if (!kwargs.contains(name)) return false;
  try {
    field = kwargs[name].cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string("attn.train: ") + name + " has the wrong type (" +
                         std::string(py::str(py::type::of(kwargs[name]).attr("__name__"))) + ")");
  }
  PyDict_DelItemString(kwargs.ptr(), name);
  return true;
}

struct Settings {
  GptConfig model;
  TrainOptions train;
  bool model_given = false;  // any setting a resumed run takes from its checkpoint
  bool max_iters_given = false, eval_iters_given = false, eval_interval_given = false;
  int64_t vocab_size = 512;  // for tokenizer="bpe"
  bool resume = false, overwrite = false;
  py::object tokenizer = py::str("char");
  py::object on_step = py::none(), on_eval = py::none(), on_notice = py::none();
};

Settings settings_from(py::dict kwargs) {
  Settings s;
  GptConfig& m = s.model;
  TrainOptions& t = s.train;
  std::string positions = to_string(m.positions), precision = to_string(t.precision);
  bool given = false;
  for (const bool model_setting : {take(kwargs, "n_layer", m.n_layer),
                                   take(kwargs, "n_head", m.n_head),
                                   take(kwargs, "n_kv_head", m.n_kv_head),
                                   take(kwargs, "n_embd", m.n_embd),
                                   take(kwargs, "block_size", m.block_size),
                                   take(kwargs, "dropout", m.dropout),
                                   take(kwargs, "bias", m.bias),
                                   take(kwargs, "positions", positions),
                                   take(kwargs, "precision", precision),
                                   take(kwargs, "batch_size", t.batch_size),
                                   take(kwargs, "grad_accum", t.grad_accum),
                                   take(kwargs, "lr", t.lr),
                                   take(kwargs, "min_lr", t.min_lr),
                                   take(kwargs, "warmup_iters", t.warmup_iters),
                                   take(kwargs, "lr_decay_iters", t.lr_decay_iters),
                                   take(kwargs, "weight_decay", t.adamw.weight_decay),
                                   take(kwargs, "beta2", t.adamw.beta2),
                                   take(kwargs, "grad_clip", t.grad_clip),
                                   take(kwargs, "val_fraction", t.val_fraction),
                                   take(kwargs, "seed", t.seed),
                                   take(kwargs, "tokenizer", s.tokenizer),
                                   take(kwargs, "vocab_size", s.vocab_size)}) {
    given = given || model_setting;
  }
  s.model_given = given;
  s.max_iters_given = take(kwargs, "max_iters", t.max_iters);
  s.eval_iters_given = take(kwargs, "eval_iters", t.eval_iters);
  s.eval_interval_given = take(kwargs, "eval_interval", t.eval_interval);
  take(kwargs, "resume", s.resume);
  take(kwargs, "overwrite", s.overwrite);
  take(kwargs, "on_step", s.on_step);
  take(kwargs, "on_eval", s.on_eval);
  take(kwargs, "on_notice", s.on_notice);
  if (!kwargs.empty()) {
    throw py::type_error("attn.train() got an unexpected keyword argument '" +
                         std::string(py::str(kwargs.begin()->first)) + "'");
  }
  m.positions = position_kind_from_string(positions);
  t.precision = matmul_precision_from_string(precision);
  ATTN_CHECK(t.eval_interval >= 1, "eval_interval must be >= 1, got ", t.eval_interval);
  return s;
}

Tokenizer make_tokenizer(const Settings& s, const std::string& corpus) {
  if (py::isinstance<BpeTokenizer>(s.tokenizer)) return s.tokenizer.cast<BpeTokenizer>();
  const std::string kind = py::str(s.tokenizer);
  if (kind == "char") return CharTokenizer::train(corpus);
  ATTN_CHECK(kind == "bpe", "tokenizer must be 'char', 'bpe' or an attn.BpeTokenizer, got '", kind,
             "'");
  BpeOptions o;
  o.vocab_size = s.vocab_size;
  o.byte_level = true;
  py::gil_scoped_release unlocked;
  return BpeTokenizer::train(corpus, o);
}

// The run's directory, as `attn train --out` checks it: a run there is continued (resume) or
// replaced (overwrite), never overwritten by accident.
void prepare_dir(const std::string& dir, const Settings& s) {
  const std::string ckpt = dir + "/checkpoint.safetensors";
  if (s.resume) {
    ATTN_CHECK(fs::exists(ckpt), dir, " has no checkpoint.safetensors to resume");
    return;
  }
  ATTN_CHECK(!fs::exists(dir) || fs::is_directory(dir), dir, " exists and is not a directory");
  // Only a checkpoint makes a run worth keeping: a run killed before its first one left
  // metrics rows that nothing can resume, and a new run replaces them.
  ATTN_CHECK(!fs::exists(ckpt) || s.overwrite, dir,
             " already holds a run; pass resume=True to continue it or overwrite=True to start "
             "over");
  fs::create_directories(dir);
  remove_stale_temporaries(dir);
}

// Calls a Python callback (the GIL held). KeyboardInterrupt raised inside it (Ctrl-C while it
// ran) is kept in `interrupt` to stop the run as a Ctrl-C between steps does; any other
// exception ends the run.
template <class... Args>
void call_back(const py::object& callback, std::optional<py::error_already_set>& interrupt,
               Args&&... args) {
  try {
    callback(std::forward<Args>(args)...);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_KeyboardInterrupt)) throw;
    interrupt.emplace(std::move(e));
  }
}

// The run's callbacks into Python. Ctrl-C (seen before a step, or raised in a callback) stops
// the run with a checkpoint and is raised after it.
TrainingCallbacks python_callbacks(const Settings& s,
                                   std::optional<py::error_already_set>& interrupt) {
  TrainingCallbacks on;
  on.after_step = [&s, &interrupt](const StepResult& r, double seconds) {
    if (s.on_step.is_none()) return;
    py::gil_scoped_acquire locked;
    call_back(s.on_step, interrupt,
              py::dict("iter"_a = r.iter, "loss"_a = r.loss, "lr"_a = r.lr,
                       "grad_norm"_a = r.grad_norm, "seconds"_a = seconds));
  };
  on.evaluation = [&s, &interrupt](int64_t iter, const EvalResult& e) {
    if (s.on_eval.is_none()) return;
    py::gil_scoped_acquire locked;
    call_back(s.on_eval, interrupt,
              py::dict("iter"_a = iter, "train_loss"_a = e.train_loss, "val_loss"_a = e.val_loss));
  };
  on.notice = [&s, &interrupt](const std::string& text) {
    py::gil_scoped_acquire locked;
    if (!s.on_notice.is_none()) return call_back(s.on_notice, interrupt, text);
    if (PyErr_WarnEx(PyExc_RuntimeWarning, text.c_str(), 1) < 0) throw py::error_already_set();
  };
  on.should_stop = [&interrupt] {
    if (interrupt) return true;
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() == 0) return false;
    interrupt.emplace();  // takes the pending exception: KeyboardInterrupt, or a handler's own
    return true;
  };
  return on;
}

PyGpt train_gpt(const py::handle& corpus_like, const py::object& out, py::kwargs kwargs) {
  Settings s = settings_from(std::move(kwargs));
  const std::string dir = out.is_none() ? std::string() : path_of(out, "out");
  ATTN_CHECK(!s.resume || !dir.empty(), "resume=True needs the run's directory (out)");
  ATTN_CHECK(!s.resume || !s.model_given, "a resumed run takes its model and training settings ",
             "from its checkpoint; only max_iters, eval_iters and eval_interval may be given");
  ATTN_CHECK(s.train.min_lr <= s.train.lr, "min_lr (", s.train.min_lr, ") must be <= lr (",
             s.train.lr, ")");
  const std::string corpus = corpus_text(corpus_like);
  ATTN_CHECK(!corpus.empty(), "the corpus is empty");
  if (!dir.empty()) prepare_dir(dir, s);

  std::optional<Tokenizer> tokenizer;
  std::optional<Trainer> trainer;
  if (s.resume) {
    py::gil_scoped_release unlocked;
    Trainer::Resumed resumed = Trainer::resume_on_text(dir + "/checkpoint.safetensors", corpus);
    tokenizer.emplace(std::move(resumed.tokenizer));
    trainer.emplace(std::move(resumed.trainer));
    if (s.max_iters_given) trainer->set_max_iters(s.train.max_iters);
    if (s.eval_iters_given) trainer->set_eval_iters(s.train.eval_iters);
    if (s.eval_interval_given) trainer->set_eval_interval(s.train.eval_interval);
  } else {
    tokenizer.emplace(make_tokenizer(s, corpus));
    s.model.vocab_size = tokenizer->vocab_size();
    py::gil_scoped_release unlocked;
    trainer.emplace(s.model, s.train, tokenizer->encode(corpus), s.train.seed);
  }

  std::optional<py::error_already_set> interrupt;
  TrainingRun run(*trainer, *tokenizer, {.dir = dir, .resumed = s.resume},
                  python_callbacks(s, interrupt));
  RunEnd end;
  {
    py::gil_scoped_release unlocked;
    end = run.run();
  }
  if (end == RunEnd::kStopped && interrupt) {
    interrupt->restore();
    throw py::error_already_set();
  }
  return PyGpt{
      std::make_shared<LoadedGpt>(LoadedGpt{std::move(trainer->model()), std::move(*tokenizer)})};
}

const char* const kTrainDoc = R"(train(corpus, out=None, **settings) -> attn.Gpt

Trains a GPT on corpus (str, bytes, a list of them, or a path) as `attn train` does, with the
same defaults and, for the same settings, the same run: an evaluation first, every
eval_interval steps and at the end; with `out`, a directory, out/checkpoint.safetensors at each
evaluation and out/metrics.csv (a row per step and per evaluation). Returns the trained model.

Settings (default in brackets):
  model     n_layer [4], n_head [4], n_kv_head [0 = n_head], n_embd [128], block_size [64],
            dropout [0], bias [True], positions ['learned'|'sinusoidal'|'rotary'],
            tokenizer ['char'|'bpe'|an attn.BpeTokenizer], vocab_size [512, for 'bpe']
  training  batch_size [12], grad_accum [1], max_iters [2000], lr [1e-3], min_lr [1e-4],
            warmup_iters [100], lr_decay_iters [0 = max_iters], weight_decay [0.1],
            beta2 [0.99], grad_clip [1.0], eval_iters [20], val_fraction [0.1],
            seed [1337], precision ['f32'|'bf16']
  the run   eval_interval [250; a resumed run keeps its own], resume [False: continue out's
            checkpoint; only max_iters, eval_iters and eval_interval may be given],
            overwrite [False: replace a run in out]
  callbacks on_step(dict: iter, loss, lr, grad_norm, seconds) after every step,
            on_eval(dict: iter, train_loss, val_loss) at every evaluation, on_notice(str)
            (default: a RuntimeWarning; bf16 on a CPU without AVX-512 BF16 says it runs float)

The run releases the GIL; the callbacks hold it. Ctrl-C between steps saves a checkpoint and
raises KeyboardInterrupt; an exception from a callback ends the run without saving.)";

}  // namespace

void add_training(py::module_& m) {
  m.def("train", &train_gpt, kTrainDoc, "corpus"_a, "out"_a = py::none());
}

}  // namespace attn::python
