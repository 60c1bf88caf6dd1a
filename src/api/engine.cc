#include "mosaic/engine.h"

#include <mutex>

#include "core/error.h"
#include "exec/cpu_executor.h"
#include "exec/forward_batch.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"

namespace mosaic {

struct Engine::Impl {
  std::unique_ptr<Model> model;
  ModelInfo info;
  std::unique_ptr<StepPlanner> planner;
  std::unique_ptr<CpuExecutor> executor;
  std::mutex mutex;  // one step at a time on the arena
  CpuArena arena;
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
  impl->planner = std::make_unique<StepPlanner>(c, GraphOptions{DType::f32, HeadMode::logits});
  impl->executor = std::make_unique<CpuExecutor>(*impl->model);
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

ForwardOutput Engine::forward(std::span<const SequenceInput> batch) const {
  std::vector<SequenceRows> views;
  views.reserve(batch.size());
  for (const SequenceInput& sequence : batch) views.push_back({sequence.ids, sequence.rows});
  const PackedBatch packed = pack_batch(impl_->model->config(), views);
  StepShape shape;
  for (const SequenceInput& sequence : batch) {
    shape.lengths.push_back(static_cast<int64_t>(sequence.ids.size()));
    shape.candidates.push_back(static_cast<int64_t>(sequence.rows.size()));
  }
  const Graph graph = impl_->planner->instantiate(shape, ChunkConfig{});
  const auto planned = impl_->planner->plan(graph);
  ForwardOutput out;
  out.vocab = impl_->model->config().vocab;
  std::lock_guard lock(impl_->mutex);
  out.logits = impl_->executor->run(graph, *planned, impl_->arena, packed);
  out.planned_peak = planned->memory.planned_peak;
  out.lower_bound = planned->memory.lower_bound;
  out.arena_bytes = impl_->arena.size();
  return out;
}

}  // namespace mosaic
