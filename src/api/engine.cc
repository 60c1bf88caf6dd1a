#include "mosaic/engine.h"

#include <chrono>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/format_bytes.h"
#include "exec/forward_batch.h"
#include "exec/step_runner.h"
#include "gen/generator.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"
#ifdef MOSAIC_HAVE_CUDA
#include "mem/cuda_arena.h"
#endif
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mosaic {

struct Engine::Impl {
  std::unique_ptr<Model> model;
  ModelInfo info;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<StepRunner> runner;     // the CPU or CUDA backend's steps
  mutable std::mutex mutex;               // one generation or forward at a time
};

namespace {

bool cuda_device_present() {
#ifdef MOSAIC_HAVE_CUDA
  return cuda_devices_visible();
#else
  return false;
#endif
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& model_dir, const EngineOptions& options) {
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
  info.max_position = c.max_position;
  info.weight_bytes = impl->model->weights().bytes;
  info.weight_dtype = std::string(dtype_name(impl->model->weights().embedding.dtype));
  if (std::filesystem::exists(model_dir / "tokenizer.json"))
    impl->tokenizer = Tokenizer::load(model_dir / "tokenizer.json");

  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    fail("device '{}' is not supported (expected auto, cpu or cuda)", options.device);
  const bool use_cuda = options.device == "cuda" || (options.device == "auto" && cuda_device_present());
  if (use_cuda) {
#ifdef MOSAIC_HAVE_CUDA
    if (!cuda_device_present()) fail("--device cuda: no CUDA device is visible");
    impl->runner = std::make_unique<CudaStepRunner>(*impl->model, options.cuda_device, options.budget);
    info.device = "cuda";
#else
    fail("--device cuda: this Mosaic was built without CUDA");
#endif
  } else {
    std::optional<uint64_t> activation_budget;
    if (options.budget) {
      if (*options.budget <= info.weight_bytes)
        fail("the weights ({}) alone exceed the budget of {}", format_bytes(info.weight_bytes),
             format_bytes(*options.budget));
      activation_budget = *options.budget - info.weight_bytes;
    }
    impl->runner = std::make_unique<CpuStepRunner>(*impl->model, activation_budget);
    info.device = "cpu";
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

ForwardOutput Engine::forward(std::span<const SequenceInput> batch) const {
  std::vector<SequenceRows> views;
  views.reserve(batch.size());
  for (const SequenceInput& sequence : batch) views.push_back({sequence.ids, sequence.rows});
  StepInput input;
  input.sequences = std::move(views);
  input.keep_logits = true;
  std::lock_guard lock(impl_->mutex);
  StepOutput step = impl_->runner->run(input);
  ForwardOutput out;
  out.vocab = impl_->model->config().vocab;
  out.logits = std::move(step.values);
  out.planned_peak = step.planned_peak;
  out.lower_bound = step.lower_bound;
  out.arena_bytes = step.arena_bytes;
  return out;
}

bool Engine::has_tokenizer() const { return impl_->tokenizer.has_value(); }

std::vector<int32_t> Engine::encode(const std::string& text, bool chat) const {
  if (!impl_->tokenizer)
    fail("{}: no tokenizer.json in the model folder; give token ids instead of text",
         impl_->model->checkpoint().dir().string());
  if (!chat) return impl_->tokenizer->encode(text, /*add_special_tokens=*/false);
  const auto format = chat_format_for_architecture(impl_->info.architecture);
  if (!format) fail("no chat format is known for {}", impl_->info.architecture);
  const ChatMessage message{"user", text};
  return impl_->tokenizer->encode(render_chat(*format, std::span(&message, 1), true), false);
}

std::string Engine::decode(std::span<const int32_t> ids) const {
  if (!impl_->tokenizer) return {};
  return impl_->tokenizer->decode(ids, /*skip_special_tokens=*/true);
}

std::vector<GenerateResult> Engine::generate(std::span<const GenerateRequest> requests,
                                             const GenerationOptions& options,
                                             const GenerateCallback& on_step) const {
  const ModelConfig& config = impl_->model->config();
  GenerationOptions resolved = options;
  if (resolved.eot_id < 0 && impl_->tokenizer) {
    const char* end_of_turn = config.family == Family::dream ? "<|im_end|>" : "<|eot_id|>";
    if (const auto id = impl_->tokenizer->token_id(end_of_turn)) resolved.eot_id = *id;
  }
  std::vector<GenerationRequest> internal;
  std::vector<GenerateResult> results(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const GenerateRequest& request = requests[r];
    results[r].prompt_ids = request.prompt_ids.empty() ? encode(request.prompt, request.chat) : request.prompt_ids;
    if (results[r].prompt_ids.empty()) fail("request {}: the prompt is empty", r);
    internal.push_back({results[r].prompt_ids, resolved});
  }
  const auto start = std::chrono::steady_clock::now();
  StepCallback callback;
  if (on_step)
    callback = [&](const StepEvent& event) {
      GenerateEvent out;
      out.request = event.request, out.step = event.step, out.masked_left = event.masked_left;
      out.finished = event.finished;
      out.output_ids = event.canvas.subspan(static_cast<size_t>(event.prompt_length));
      std::vector<int32_t> committed;
      for (int32_t p : event.committed) committed.push_back(static_cast<int32_t>(p - event.prompt_length));
      out.committed = committed;
      out.batch_sequences = event.batch_sequences, out.batch_tokens = event.batch_tokens;
      out.batch_candidates = event.batch_candidates, out.planned_peak = event.planned_peak;
      return on_step(out);
    };
  std::lock_guard lock(impl_->mutex);
  const std::vector<GenerationResult> generated = mosaic::generate(config, *impl_->runner, internal, callback);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t r = 0; r < requests.size(); ++r) {
    const GenerationResult& g = generated[r];
    GenerateResult& out = results[r];
    out.output_ids.assign(g.canvas.begin() + g.prompt_length, g.canvas.end());
    out.steps = g.steps, out.forwards = g.forwards, out.stopped_at_eos = g.stopped_at_eos;
    out.cancelled = g.cancelled, out.tokens_per_step = g.tokens_per_step, out.seconds = seconds;
    // The answer ends at the first EOS or end-of-turn token (the rest is filler).
    std::vector<int32_t> answer;
    for (const int32_t id : out.output_ids) {
      if (id == config.eos_token_id || (resolved.eot_id >= 0 && id == resolved.eot_id)) break;
      if (id != config.mask_token_id) answer.push_back(id);
    }
    out.text = decode(answer);
  }
  return results;
}

}  // namespace mosaic
