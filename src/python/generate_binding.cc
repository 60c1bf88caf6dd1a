// _Engine.generate: runs a batch of prompts with the GIL released. After every step of every
// request the engine's callback takes the GIL back to (1) check for Ctrl-C (PyErr_CheckSignals:
// a pending KeyboardInterrupt cancels the generation and is raised once the engine has
// returned) and (2) hand the step to the optional Python callable `on_step`, whose False
// cancels the generation (mosaic.Engine.stream closes that way) and whose exception cancels it
// and propagates. At interpreter exit, running generations are cancelled first (RunningGenerations).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>

#include "python/bindings.h"
#include "python/generation_kwargs.h"

namespace mosaic::python {
namespace {

py::dict event_dict(const GenerateEvent& event) {
  py::dict d;
  d["request"] = event.request;
  d["step"] = event.step;
  d["masked_left"] = event.masked_left;
  d["finished"] = event.finished;
  d["output_ids"] = std::vector<int32_t>(event.output_ids.begin(), event.output_ids.end());
  d["committed"] = std::vector<int32_t>(event.committed.begin(), event.committed.end());
  d["confidence"] = std::vector<float>(event.confidence.begin(), event.confidence.end());
  d["batch_sequences"] = event.batch_sequences;
  d["batch_tokens"] = event.batch_tokens;
  d["batch_candidates"] = event.batch_candidates;
  d["planned_peak_bytes"] = event.planned_peak;
  return d;
}

py::dict result_dict(const GenerateResult& result, uint64_t activation_peak) {
  py::dict d;
  d["text"] = result.text;
  d["prompt_ids"] = result.prompt_ids;
  d["output_ids"] = result.output_ids;
  d["steps"] = result.steps;
  d["forwards"] = result.forwards;
  d["seconds"] = result.seconds;
  d["tokens_per_step"] = result.tokens_per_step;
  d["forward_seconds"] = result.forward_seconds;
  d["forward_host_seconds"] = result.forward_host_seconds;
  d["stopped_at_eos"] = result.stopped_at_eos;
  d["cancelled"] = result.cancelled;
  d["cache"] = result.cache;
  d["activation_peak_bytes"] = activation_peak;
  return d;
}

// Prompt + generation beyond the model's trained context is refused unless asked for, as
// `mosaic generate` does (--allow-long-context).
void check_context(const Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                   const GenerationOptions& options, size_t suffix_tokens) {
  const int64_t context = engine.info().max_position;
  for (size_t r = 0; r < prompts.size(); ++r) {
    const int64_t prompt = static_cast<int64_t>(prompts[r].size() + suffix_tokens);  // a suffix takes context too
    if (context > 0 && prompt + options.gen_length > context)
      throw py::value_error(fmt::format(
          "prompt {} ({} tokens) + gen_length {} = {} exceeds the model's context of {} tokens; "
          "shorten them or pass allow_long_context=True",
          r, prompt, options.gen_length, prompt + options.gen_length, context));
  }
}

// Generations running with the GIL released, and whether the interpreter is exiting. A thread that
// takes the GIL back once finalisation has begun is ended by CPython with a forced unwind, which
// through our C++ frames is std::terminate (SIGABRT). So an atexit hook, which runs while the
// interpreter is still whole, makes every running generation cancel at its next step without
// touching Python, and waits (GIL released) until each has its GIL back and has left.
struct RunningGenerations {
  std::mutex mutex;
  std::condition_variable idle;
  int64_t running = 0;
  std::atomic<bool> exiting{false};
};

RunningGenerations& running_generations() {
  static auto* const generations = new RunningGenerations;  // never destroyed: used at exit
  return *generations;
}

void wait_for_generations_at_exit() {
  RunningGenerations& g = running_generations();
  g.exiting = true;
  py::gil_scoped_release release;
  std::unique_lock lock(g.mutex);
  g.idle.wait(lock, [&] { return g.running == 0; });
}

// Counts one generation from before the GIL is released until after it is taken back.
class RunningGeneration {
 public:
  RunningGeneration() {
    RunningGenerations& g = running_generations();
    if (g.exiting) throw py::value_error("the interpreter is exiting: no new generation starts");
    std::lock_guard lock(g.mutex);
    ++g.running;
  }
  ~RunningGeneration() {
    RunningGenerations& g = running_generations();
    std::lock_guard lock(g.mutex);
    if (--g.running == 0) g.idle.notify_all();
  }
  RunningGeneration(const RunningGeneration&) = delete;
  RunningGeneration& operator=(const RunningGeneration&) = delete;
};

py::list generate(const Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                  const py::dict& sampling, const py::object& on_step, bool allow_long_context,
                  const std::vector<int32_t>& suffix) {
  const GenerationOptions options = generation_options_from_kwargs(sampling);
  engine.resolve_options(options);  // every option checked (and named) before sizes are added up
  if (!allow_long_context) check_context(engine, prompts, options, suffix.size());
  std::vector<GenerateRequest> requests(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r) requests[r].prompt_ids = prompts[r], requests[r].suffix_ids = suffix;

  std::vector<uint64_t> activation_peak(prompts.size(), 0);  // largest planned step, per request
  std::exception_ptr python_error;
  const GenerateCallback callback = [&](const GenerateEvent& event) {
    uint64_t& peak = activation_peak[static_cast<size_t>(event.request)];
    peak = std::max(peak, event.planned_peak);
    if (running_generations().exiting) return false;  // cancel; the GIL is the exit hook's now
    py::gil_scoped_acquire acquire;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (on_step.is_none()) return true;
      const py::object keep_going = on_step(event_dict(event));
      if (keep_going.is_none()) return true;
      const int truth = PyObject_IsTrue(keep_going.ptr());
      if (truth < 0) throw py::error_already_set();
      return truth == 1;
    } catch (...) {
      python_error = std::current_exception();
      return false;
    }
  };
  std::vector<GenerateResult> results;
  {
    const RunningGeneration running;  // outlives the release below: counted until the GIL is back
    py::gil_scoped_release release;
    results = engine.generate(requests, options, callback);
  }
  if (python_error) std::rethrow_exception(python_error);
  py::list out;
  for (size_t r = 0; r < results.size(); ++r) out.append(result_dict(results[r], activation_peak[r]));
  return out;
}

}  // namespace

void bind_generate(EngineClass& engine) {
  py::module_::import("atexit").attr("register")(py::cpp_function(&wait_for_generations_at_exit));
  engine.def("generate", &generate, py::arg("prompts"), py::arg("sampling"),
             py::arg("on_step") = py::none(), py::arg("allow_long_context") = false,
             py::arg("suffix") = std::vector<int32_t>{},
             "Generates for a batch of token-id prompts; a list of result dicts");
}

}  // namespace mosaic::python
