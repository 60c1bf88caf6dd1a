// _Engine: opening a model folder, its description, mask-only forwards into NumPy arrays, and
// the tokenizer. Every call that may take time runs with the GIL released (the engine has its
// own lock: one forward or generation at a time).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "python/bindings.h"

namespace mosaic::python {
namespace {

using IdArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

std::unique_ptr<Engine> open_engine(const std::string& model_dir, const std::string& device,
                                    int cuda_device, std::optional<uint64_t> budget,
                                    std::optional<std::string> adapter, int64_t streamed_layers,
                                    int64_t tensor_parallel, int64_t context_parallel) {
  EngineOptions options;
  options.device = device;
  options.cuda_device = cuda_device;
  options.budget = budget;
  if (adapter) options.adapter = *adapter;
  options.streamed_layers = streamed_layers;
  options.tensor_parallel = tensor_parallel;
  options.context_parallel = context_parallel;
  py::gil_scoped_release release;
  return Engine::open(model_dir, options);
}

py::dict info_dict(const ModelInfo& info) {
  py::dict d;
  d["family"] = info.family;
  d["architecture"] = info.architecture;
  d["device"] = info.device;
  d["hidden"] = info.hidden;
  d["layers"] = info.layers;
  d["heads"] = info.heads;
  d["kv_heads"] = info.kv_heads;
  d["head_dim"] = info.head_dim;
  d["ffn"] = info.ffn;
  d["experts"] = info.experts;
  d["experts_per_token"] = info.experts_per_token;
  d["expert_ffn"] = info.expert_ffn;
  d["vocab"] = info.vocab;
  d["mask_token_id"] = info.mask_token_id;
  d["mask_token_source"] = info.mask_token_source;
  d["eos_token_source"] = info.eos_token_source;
  d["eos_token_id"] = info.eos_token_id;
  d["rope_theta"] = info.rope_theta;
  d["max_position"] = info.max_position;
  d["weight_bytes"] = info.weight_bytes;
  d["weight_dtype"] = info.weight_dtype;
  d["streamed_layers"] = info.streamed_layers;
  d["streamed_weight_bytes"] = info.streamed_weight_bytes;
  d["adapter"] = info.adapter.empty() ? py::object(py::none()) : py::object(py::str(info.adapter));
  d["adapted_projections"] = info.adapted_projections;
  return d;
}

std::vector<int32_t> to_vector(const IdArray& array) {
  if (array.ndim() != 1) throw py::value_error("token ids and rows must be 1-D");
  return std::vector<int32_t>(array.data(), array.data() + array.size());
}

// (logits [rows, vocab] float32, memory of the step). The array owns the engine's buffer.
py::tuple forward(const Engine& engine, const std::vector<IdArray>& ids, const std::vector<IdArray>& rows) {
  if (ids.size() != rows.size()) throw py::value_error("one list of rows per sequence is needed");
  std::vector<SequenceInput> batch(ids.size());
  for (size_t s = 0; s < ids.size(); ++s) batch[s] = {to_vector(ids[s]), to_vector(rows[s])};
  auto out = std::make_unique<ForwardOutput>();
  {
    py::gil_scoped_release release;
    *out = engine.forward(batch);
  }
  const py::ssize_t vocab = out->vocab;
  const py::ssize_t row_count = vocab > 0 ? static_cast<py::ssize_t>(out->logits.size()) / vocab : 0;
  py::dict memory;
  memory["planned_peak_bytes"] = out->planned_peak;
  memory["lower_bound_bytes"] = out->lower_bound;
  memory["arena_bytes"] = out->arena_bytes;
  float* data = out->logits.data();
  py::capsule owner(out.release(), [](void* p) { delete static_cast<ForwardOutput*>(p); });
  py::array_t<float> logits({row_count, vocab}, data, owner);
  return py::make_tuple(logits, memory);
}

std::vector<int32_t> encode(const Engine& engine, const std::string& text, bool chat) {
  py::gil_scoped_release release;
  return engine.encode(text, chat);
}

std::string decode(const Engine& engine, const std::vector<int32_t>& ids) {
  py::gil_scoped_release release;
  return engine.decode(ids);
}

}  // namespace

void bind_engine(py::module_& m) {
  EngineClass engine(m, "_Engine", "A loaded model (mosaic::Engine); use mosaic.Engine");
  engine.def(py::init(&open_engine), py::arg("model_dir"), py::arg("device") = "auto",
             py::arg("cuda_device") = 0, py::arg("budget") = std::nullopt,
             py::arg("adapter") = std::nullopt, py::arg("streamed_layers") = kAutoStreamedLayers,
             py::arg("tensor_parallel") = 1, py::arg("context_parallel") = 1)
      .def_property_readonly("info", [](const Engine& e) { return info_dict(e.info()); })
      .def_property_readonly("has_tokenizer", &Engine::has_tokenizer)
      .def("forward", &forward, py::arg("ids"), py::arg("rows"),
           "Logits of the requested rows: (float32 [rows, vocab], memory dict)")
      .def("encode", &encode, py::arg("text"), py::arg("chat") = false)
      .def("decode", &decode, py::arg("ids"));
  bind_generate(engine);
}

}  // namespace mosaic::python
