// Mosaic's public C++ API: open a Hugging Face model folder, run mask-only forwards.
//
//   auto engine = mosaic::Engine::open("/models/LLaDA-8B-Instruct");
//   std::vector<mosaic::SequenceInput> batch = {{.ids = {...}, .rows = {5, 6}}};
//   mosaic::ForwardOutput out = engine->forward(batch);   // out.logits: [2, vocab]
//
// Errors in what the caller gives (a damaged folder, a token id outside the vocabulary, a row
// outside its sequence) throw mosaic::Error (derived from std::runtime_error) with one line that
// names the file, field or value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "mosaic/error.h"

namespace mosaic {

struct ModelInfo {
  std::string family;         // "llada" | "dream"
  std::string architecture;   // config.json architectures[0]
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t mask_token_id = -1, eos_token_id = -1;
  double rope_theta = 0;
  uint64_t weight_bytes = 0;
  std::string weight_dtype;   // dtype of the embedding, e.g. "BF16"
};

struct SequenceInput {
  std::vector<int32_t> ids;   // the whole canvas
  std::vector<int32_t> rows;  // positions whose predicted-token logits are wanted
};

struct ForwardOutput {
  int64_t vocab = 0;
  std::vector<float> logits;  // [total requested rows, vocab], sequences in batch order
  // Memory of the step as planned (bytes): the arena's planned peak for the step's shape bucket,
  // the most bytes live at once, and what the arena holds.
  uint64_t planned_peak = 0, lower_bound = 0, arena_bytes = 0;
};

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::filesystem::path& model_dir);
  ~Engine();

  const ModelInfo& info() const;
  // Logits for the requested rows only; no other row's logits are computed.
  ForwardOutput forward(std::span<const SequenceInput> batch) const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic
