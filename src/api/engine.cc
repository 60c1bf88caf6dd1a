#include "mosaic/engine.h"

#include "core/error.h"
#include "exec/direct_forward.h"
#include "exec/forward_batch.h"
#include "model/model_weights.h"

namespace mosaic {

struct Engine::Impl {
  std::unique_ptr<Model> model;
  ModelInfo info;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& model_dir) {
  auto impl = std::make_unique<Impl>();
  impl->model = Model::load(model_dir);
  const ModelConfig& c = impl->model->config();
  ModelInfo& info = impl->info;
  info.family = std::string(family_name(c.family));
  info.architecture = c.architecture;
  info.hidden = c.hidden, info.layers = c.layers, info.heads = c.heads;
  info.kv_heads = c.kv_heads, info.head_dim = c.head_dim, info.ffn = c.ffn, info.vocab = c.vocab;
  info.mask_token_id = c.mask_token_id, info.eos_token_id = c.eos_token_id;
  info.rope_theta = c.rope_theta;
  info.weight_bytes = impl->model->weights().bytes;
  info.weight_dtype = std::string(dtype_name(impl->model->weights().embedding.dtype));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

ForwardOutput Engine::forward(std::span<const SequenceInput> batch) const {
  std::vector<SequenceRows> views;
  views.reserve(batch.size());
  for (const SequenceInput& sequence : batch) views.push_back({sequence.ids, sequence.rows});
  const PackedBatch packed = pack_batch(impl_->model->config(), views);
  ForwardOutput out;
  out.vocab = impl_->model->config().vocab;
  out.logits = direct_forward(*impl_->model, packed);
  return out;
}

}  // namespace mosaic
