// make_test_model: random checkpoints in the real Hugging Face layout (mosaic::make_test_model),
// for tests and examples without downloading weights.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "mosaic/test_model.h"
#include "python/bindings.h"

namespace mosaic::python {

void bind_test_model(py::module_& m) {
  m.def(
      "make_test_model",
      [](std::string out, std::string family, std::string preset, std::optional<int64_t> layers,
         std::optional<int64_t> hidden, std::optional<int64_t> heads, std::optional<int64_t> kv_heads,
         std::optional<int64_t> ffn, std::optional<int64_t> vocab, std::optional<double> rope_theta,
         bool tied_embeddings, bool qkv_bias, std::string dtype, int shards, std::string tokenizer,
         uint64_t seed) {
        TestModelRequest request;
        request.out = std::move(out);
        request.family = std::move(family);
        request.preset = std::move(preset);
        request.layers = layers, request.hidden = hidden, request.heads = heads;
        request.kv_heads = kv_heads, request.ffn = ffn, request.vocab = vocab;
        request.rope_theta = rope_theta;
        request.tied_embeddings = tied_embeddings;
        request.qkv_bias = qkv_bias;
        request.dtype = std::move(dtype);
        request.shards = shards;
        request.tokenizer = std::move(tokenizer);
        request.seed = seed;
        py::gil_scoped_release release;
        make_test_model(request);
      },
      py::kw_only(), py::arg("out"), py::arg("family") = "llada", py::arg("preset") = "tiny",
      py::arg("layers") = std::nullopt, py::arg("hidden") = std::nullopt,
      py::arg("heads") = std::nullopt, py::arg("kv_heads") = std::nullopt,
      py::arg("ffn") = std::nullopt, py::arg("vocab") = std::nullopt,
      py::arg("rope_theta") = std::nullopt, py::arg("tied_embeddings") = false,
      py::arg("qkv_bias") = false, py::arg("dtype") = "bf16", py::arg("shards") = 1,
      py::arg("tokenizer") = "", py::arg("seed") = 0,
      "Writes a random checkpoint (config.json + safetensors) to `out`");
}

}  // namespace mosaic::python
