#include "mosaic/engine.h"

#include <chrono>
#include <filesystem>
#include <mutex>

#include "api/batch_session_impl.h"
#include "api/step_memory_model.h"
#include "api/step_runner_factory.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/printable.h"
#include "core/regular_file.h"
#include "exec/forward_batch.h"
#include "exec/step_runner.h"
#include "gen/generation_options.h"
#include "gen/generator.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mosaic {

struct Engine::Impl {
  std::unique_ptr<Model> model;
  ModelInfo info;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<StepRunner> runner;     // the CPU or CUDA backend's steps
  mutable std::mutex mutex;               // one generation or forward at a time
  std::unique_ptr<StepMemoryModel> memory;  // admission and PAR by the plan (BatchSession, fit)
};

namespace {

// The tokenizer's end-of-turn token for the architecture's chat format, or -1.
int64_t default_end_of_turn(const std::optional<Tokenizer>& tokenizer, const std::string& architecture) {
  const std::optional<ChatFormat> format = chat_format_for_architecture(architecture);
  if (!tokenizer || !format) return -1;
  const auto id = tokenizer->token_id(chat_specials(*format).end_of_turn);
  return id ? *id : -1;
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& model_dir, const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->model = Model::load(model_dir, options.adapter);
  const ModelConfig& c = impl->model->config();
  ModelInfo& info = impl->info;
  info.family = std::string(family_name(c.family));
  info.architecture = c.architecture;
  info.hidden = c.hidden, info.layers = c.layers, info.heads = c.heads;
  info.kv_heads = c.kv_heads, info.head_dim = c.head_dim, info.ffn = c.ffn, info.vocab = c.vocab;
  info.experts = c.experts, info.experts_per_token = c.experts_per_token, info.expert_ffn = c.expert_ffn;
  if (c.experts > 0)
    info.router = c.router == RouterKind::softmax_top_k
                      ? "softmax top-k"
                      : fmt::format("sigmoid + bias, {} groups keep {}, renormalised x {}", c.router_groups,
                                    c.router_top_groups, c.routed_scaling);
  info.shared_expert_ffn = c.shared_expert_ffn, info.dense_layers = c.dense_layers, info.rotary_dim = c.rotary();
  info.mask_token_source = c.token_ids_from_family.mask ? "family default" : "config.json";
  info.eos_token_source = c.token_ids_from_family.eos ? "family default" : "config.json";
  info.mask_token_id = c.mask_token_id, info.eos_token_id = c.eos_token_id;
  info.rope_theta = c.rope_theta;
  info.max_position = c.max_position;
  info.attention = std::string(block_attention_name(c.block_attention));
  info.weight_bytes = impl->model->weights().bytes;
  info.weight_dtype = std::string(dtype_name(impl->model->weights().embedding.dtype));
  if (options.adapter) info.adapter = printable_path(*options.adapter);
  info.adapted_projections = static_cast<int64_t>(impl->model->adapted_projections());
  // Present means loaded: a tokenizer.json that cannot be read is an error, not a missing file.
  if (RegularFile::open_if_exists(model_dir / "tokenizer.json"))
    impl->tokenizer = Tokenizer::load(model_dir / "tokenizer.json");

  BackendChoice backend = make_step_runner(*impl->model, options);
  impl->runner = std::move(backend.runner);
  info.device = backend.device;
  info.streamed_layers = backend.streamed_layers, info.streamed_weight_bytes = backend.streamed_weight_bytes;
  impl->memory = std::make_unique<StepMemoryModel>(c, DeviceMemorySetup{backend.memory, backend.budget});
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

ForwardOutput Engine::forward(std::span<const SequenceInput> batch) const {
  // Block-causal attention needs the block layout, which a forward is given per sequence: a
  // forward over full attention would be silently wrong.
  const ModelConfig& config = impl_->model->config();
  const auto model = [&] { return printable_path(impl_->model->checkpoint().dir()); };  // for errors only
  std::vector<SequenceRows> views;
  views.reserve(batch.size());
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& sequence = batch[s];
    SequenceRows view{sequence.ids, sequence.rows};
    const int64_t length = static_cast<int64_t>(sequence.ids.size());
    if (config.block_attention == BlockAttention::none) {
      if (sequence.block_length != 0 || sequence.prompt_length != 0)
        fail("sequence {}: a block length or prompt length was given, but {} attends fully (not block-causally)",
             s, model());
    } else {
      if (sequence.block_length <= 0)
        fail("sequence {}: {} attends block-causally (block_attention \"{}\"): give its block length (mosaic "
             "forward --block-length N)", s, model(), block_attention_name(config.block_attention));
      if (sequence.prompt_length < 0 || sequence.prompt_length > length)
        fail("sequence {}: prompt length {} is outside its {} positions", s, sequence.prompt_length, length);
      if (config.block_attention == BlockAttention::absolute && sequence.prompt_length != 0)
        fail("sequence {}: {} lays its blocks from position 0 (block_attention \"absolute\"); a prompt length "
             "does not apply", s, model());
      view.layout = {config.block_attention, sequence.prompt_length, sequence.block_length, length};
    }
    views.push_back(view);
  }
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

std::vector<int32_t> Engine::encode(const std::string& text, bool chat, bool parse_special) const {
  if (!chat) {
    if (!impl_->tokenizer)
      fail("{}: no tokenizer.json in the model folder; give token ids instead of text",
           printable_path(impl_->model->checkpoint().dir()));
    return impl_->tokenizer->encode(text, parse_special ? Tokenizer::SpecialText::parse : Tokenizer::SpecialText::plain,
                                    /*add_special_tokens=*/false);
  }
  const ChatTurn turn{"user", text};
  return encode_chat(std::span(&turn, 1), parse_special);
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
  if (resolved.eot_id < 0) resolved.eot_id = default_end_of_turn(impl_->tokenizer, config.architecture);
  std::vector<GenerationRequest> internal;
  std::vector<GenerateResult> results(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const GenerateRequest& request = requests[r];
    results[r].prompt_ids = request.prompt_ids.empty() ? encode(request.prompt, request.chat, request.parse_special)
                                                       : request.prompt_ids;
    if (results[r].prompt_ids.empty()) fail("request {}: the prompt is empty", r);
    std::vector<int32_t> suffix = request.suffix_ids;
    if (suffix.empty() && !request.suffix.empty()) suffix = encode(request.suffix, false, request.parse_special);
    internal.push_back({results[r].prompt_ids, resolved, std::move(suffix)});
  }
  // Every request's largest step against the budget, before any canvas is allocated.
  for (size_t r = 0; r < requests.size(); ++r) {
    // The suffix's tokens are computed with the prompt's (the server counts them the same way).
    const int64_t prompt_tokens = static_cast<int64_t>(results[r].prompt_ids.size() + internal[r].suffix.size());
    const MemoryFit fits = fit(prompt_tokens, resolved);
    if (!fits.fits)
      fail("request {} ({} {} tokens + {} to generate) needs {} of memory at its largest step, with every op "
           "chunked as far as it goes; the budget is {}",
           r, prompt_tokens, internal[r].suffix.empty() ? "prompt" : "prompt and suffix", resolved.gen_length, format_bytes(fits.bytes_needed), format_bytes(fits.budget));
  }
  const auto start = std::chrono::steady_clock::now();
  StepCallback callback;
  if (on_step)
    callback = [&](const StepEvent& event) {
      GenerateEvent out;
      out.request = event.request, out.step = event.step, out.masked_left = event.masked_left;
      out.finished = event.finished;
      out.output_ids = event.canvas.subspan(static_cast<size_t>(event.prompt_length), static_cast<size_t>(event.gen_length));
      std::vector<int32_t> committed;
      for (int32_t p : event.committed) committed.push_back(static_cast<int32_t>(p - event.prompt_length));
      out.committed = committed;
      out.confidence = event.confidence;
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
    out.output_ids.assign(g.canvas.begin() + g.prompt_length, g.canvas.begin() + g.prompt_length + g.gen_length);
    out.logprobs = g.logprobs;
    out.steps = g.steps, out.forwards = g.forwards, out.stopped_at_eos = g.stopped_at_eos;
    out.cancelled = g.cancelled, out.tokens_per_step = g.tokens_per_step, out.seconds = seconds;
    out.forward_seconds = g.forward_seconds, out.forward_host_seconds = g.forward_host_seconds;
    out.cache = std::string(cache_mode_name(g.cache));
    out.text = decode(answer_ids(out.output_ids, resolved));
  }
  return results;
}

std::vector<int32_t> Engine::answer_ids(std::span<const int32_t> output_ids, const GenerationOptions& options) const {
  // The answer ends at the first EOS or end-of-turn token (the rest is filler).
  const ModelConfig& config = impl_->model->config();
  std::vector<int32_t> answer;
  for (const int32_t id : output_ids) {
    if (id == config.eos_token_id || (options.eot_id >= 0 && id == options.eot_id)) break;
    if (id != config.mask_token_id) answer.push_back(id);
  }
  return answer;
}

GenerationOptions Engine::resolve_options(const GenerationOptions& options) const {
  GenerationOptions resolved = options;
  if (resolved.eot_id < 0) resolved.eot_id = default_end_of_turn(impl_->tokenizer, impl_->model->config().architecture);
  validate_generation_options(impl_->model->config(), resolved);
  return resolved;
}

void Engine::check_suffix(const GenerationOptions& options, int64_t suffix_tokens) const {
  validate_suffix(impl_->model->config(), options, suffix_tokens);
}

MemoryFit Engine::fit(int64_t prompt_tokens, const GenerationOptions& options) const {
  GenerationOptions resolved = resolve_options(options);
  validate_for_prompt(impl_->model->config(), prompt_tokens, resolved);
  return impl_->memory->fit(step_bound(impl_->model->config(), prompt_tokens, resolved, impl_->memory->cache_page_rows()));
}

std::unique_ptr<BatchSession> Engine::start_batch() const {
  return std::unique_ptr<BatchSession>(new BatchSession(std::make_unique<BatchSession::Impl>(
      *this, impl_->model->config(), *impl_->runner, impl_->mutex, *impl_->memory)));
}

std::vector<int32_t> Engine::encode_chat(std::span<const ChatTurn> turns, bool parse_special) const {
  if (!impl_->tokenizer)
    fail("{}: no tokenizer.json in the model folder; chat needs one",
         printable_path(impl_->model->checkpoint().dir()));
  const auto format = chat_format_for_architecture(impl_->info.architecture);
  if (!format) fail("no chat format is known for {}", impl_->info.architecture);
  std::vector<ChatMessage> messages;
  for (const ChatTurn& turn : turns) messages.push_back({turn.role, turn.content});
  // The format's markup is special tokens; the messages' text is plain unless asked otherwise.
  const std::vector<ChatPart> parts = render_chat_parts(*format, messages, true);
  std::vector<Tokenizer::TextPiece> pieces;
  for (const ChatPart& part : parts)
    pieces.push_back({part.text, part.from_message && !parse_special ? Tokenizer::SpecialText::plain
                                                                     : Tokenizer::SpecialText::parse});
  return impl_->tokenizer->encode(pieces, /*add_special_tokens=*/false);
}

}  // namespace mosaic
