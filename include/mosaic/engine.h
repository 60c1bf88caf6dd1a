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
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "mosaic/error.h"
#include "mosaic/generation_options.h"

namespace mosaic {

struct ModelInfo {
  std::string family;         // "llada" | "dream" | "llada-moe" | "llada2"
  std::string architecture;   // config.json architectures[0]
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t mask_token_id = -1, eos_token_id = -1;
  // Where each came from: "config.json", or "family default" when the config has none.
  std::string mask_token_source, eos_token_source;
  // A mixture-of-experts model's experts per layer, experts each token takes, and their width
  // (0 for dense models).
  int64_t experts = 0, experts_per_token = 0, expert_ffn = 0;
  // LLaDA 2.x: the router ("softmax top-k" or "sigmoid, N groups keep M, scaled S"), the shared
  // expert's width, the leading dense layers, and the head dims RoPE turns (head_dim unless partial).
  std::string router;
  int64_t shared_expert_ffn = 0, dense_layers = 0, rotary_dim = 0;
  double rope_theta = 0;
  int64_t max_position = 0;   // trained context length from config.json (0: unknown)
  // "full", or the block-causal layout ("prompt", "absolute"): block-causal models decode with
  // their exact block cache (docs/design/cached-decoding.md).
  std::string attention = "full";
  uint64_t weight_bytes = 0;
  std::string weight_dtype;   // dtype of the embedding, e.g. "BF16"
  // The decoder layers whose weights stay in pinned host memory (EngineOptions::streamed_layers
  // as given, or as auto chose it), and their bytes.
  int64_t streamed_layers = 0;
  uint64_t streamed_weight_bytes = 0;
  // The PEFT LoRA adapter folder merged into the weights ("" for none) and how many projections
  // it changed (docs/design/lora-adapters.md).
  std::string adapter;
  int64_t adapted_projections = 0;
  std::string device;         // "cpu" or "cuda" — where the engine runs
};

struct SequenceInput {
  std::vector<int32_t> ids;   // the whole canvas
  std::vector<int32_t> rows;  // positions whose predicted-token logits are wanted
  // A block-causal model's blocks (ModelInfo::attention not "full"): the block length, and for a
  // model whose prompt is one block ("prompt", D2F) the prompt's length. A full-attention model
  // takes neither.
  int64_t block_length = 0;
  int64_t prompt_length = 0;
};

struct ForwardOutput {
  int64_t vocab = 0;
  std::vector<float> logits;  // [total requested rows, vocab], sequences in batch order
  // Memory of the step as planned (bytes): the arena's planned peak for the step's shape bucket,
  // the most bytes live at once, and what the arena holds.
  uint64_t planned_peak = 0, lower_bound = 0, arena_bytes = 0;
};

// EngineOptions::streamed_layers: choose the count at load (docs/design/weight-staging.md).
inline constexpr int64_t kAutoStreamedLayers = -1;

struct EngineOptions {
  // "auto" (the GPU when one is present and Mosaic was built with CUDA), "cpu" or "cuda".
  std::string device = "auto";
  int cuda_device = 0;
  // All memory the engine may use: weights + workspace + activations. Steps that would exceed
  // it are chunked lazily; a step no chunking fits is an error naming the bytes it needs.
  std::optional<uint64_t> budget;
  // A PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) for this base,
  // merged into the weights at load, in fp32 (docs/design/lora-adapters.md). The merged
  // projections count as weight bytes against the budget.
  std::optional<std::filesystem::path> adapter;
  // The last `streamed_layers` decoder layers keep their product weights (attention and MLP
  // projections) in pinned host memory; each step copies them into its plan one layer ahead of
  // use (docs/design/weight-staging.md), with the same bits as resident weights. The device then
  // holds fewer weight bytes, so the same budget holds longer steps. CUDA only; 0: every weight
  // resident. kAutoStreamedLayers (the default): on CUDA the fewest layers with which a step of
  // `auto_stream_tokens` tokens fits the budget (none wherever it fits with every weight
  // resident), as `mosaic plan --weights auto` chooses; on the CPU none. `mosaic plan --weights
  // auto --budget B --seq-len L` reports how many a step of L tokens needs.
  int64_t streamed_layers = kAutoStreamedLayers;
  // The step length auto streaming sizes the device's weights for; 0: the model's context length,
  // at most 4,096 tokens. Longer steps still run where chunking fits them beside those weights.
  int64_t auto_stream_tokens = 0;
  // Tensor parallelism over this many ranks (docs/design/tensor-parallel.md): attention heads, FFN
  // columns and the vocabulary split, all-reduces after the output and down projections, the
  // fused head's summaries combined across ranks. On the CPU the ranks are threads sharing its
  // memory, and `budget` is each rank's. The model's heads, FFN width and vocabulary must divide
  // by it. 1: one device.
  int64_t tensor_parallel = 1;
  // Context parallelism over this many ranks (docs/design/context-parallel.md): each rank holds the
  // whole model and computes its share of the step's rows against every rank's keys and values.
  // On the CPU the ranks are threads; `budget` is each rank's. Not with tensor parallelism or a KV
  // cache yet. 1: one device.
  int64_t context_parallel = 1;
};

struct GenerateRequest {
  std::string prompt;               // text (needs the folder's tokenizer.json)
  bool chat = false;                // wrap the prompt in the model's chat format
  std::vector<int32_t> prompt_ids;  // token ids; used instead of `prompt` when not empty
  // Infilling (docs/design/infilling.md): text (or ids, used when not empty) that follows the
  // generated region; the model fills the gen_length positions between prompt and suffix.
  std::string suffix;
  std::vector<int32_t> suffix_ids;
  // Whether special-token text in `prompt` and `suffix` ("<|mdm_mask|>") is that token; by
  // default it is plain text (Engine::encode).
  bool parse_special = false;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;  // the generated region (mask id where nothing was decoded)
  std::string text;                 // decoded answer, up to the first EOS / end of turn
  int64_t steps = 0;                // denoising steps taken
  int64_t forwards = 0;             // steps that ran a forward (NFE)
  bool stopped_at_eos = false;
  bool cancelled = false;
  std::vector<int64_t> tokens_per_step;
  double seconds = 0;
  // Over the forwards it took part in: their wall time, and the part of that the host spent
  // before waiting for the device (packing, planning, kernel launches). The host's share of the
  // generation is at most (seconds - forward_seconds + forward_host_seconds) / seconds: all time
  // outside the forwards counted as host time, as the launch time inside them.
  double forward_seconds = 0, forward_host_seconds = 0;
  // The KV cache it decoded with: "none", "prefix", "dual" or "block" (docs/design/cached-decoding.md).
  std::string cache = "none";
  // With GenerationOptions::logprobs: each committed token's log-probabilities, by position.
  std::vector<TokenLogprob> logprobs;
};

// After every step of every request; return false to cancel the generation.
struct GenerateEvent {
  int64_t request = 0, step = 0, masked_left = 0;
  bool finished = false;
  std::span<const int32_t> output_ids;  // the generated region now
  std::span<const int32_t> committed;   // positions (in the generated region) unmasked by this step
  // The confidence each committed position was ranked by, in the same order: the algorithm's
  // score of its token (LLaDA low_confidence and Dream maskgit_plus: its probability; topk_margin:
  // top-1 minus top-2 probability; entropy: minus the entropy; random remasking: the token's
  // probability, though positions were ranked at random).
  std::span<const float> confidence;
  int64_t batch_sequences = 0, batch_tokens = 0, batch_candidates = 0;
  uint64_t planned_peak = 0;
};
using GenerateCallback = std::function<bool(const GenerateEvent&)>;

// Whether a step fits the memory budget by the plan (lazy chunking included).
struct MemoryFit {
  bool fits = true;
  // Budget bytes the step needs: weights + workspace + its planned activations, or, when it does
  // not fit, + the activations with every op chunked as far as it goes. 0 without a budget.
  uint64_t bytes_needed = 0;
  uint64_t budget = 0;  // 0: no budget was set, everything fits
};

// One turn of a chat, rendered with the model's chat format.
struct ChatTurn {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

class BatchSession;

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::filesystem::path& model_dir,
                                      const EngineOptions& options = {});
  ~Engine();

  const ModelInfo& info() const;
  // Logits for the requested rows only; no other row's logits are computed.
  ForwardOutput forward(std::span<const SequenceInput> batch) const;

  // Generates for a batch of prompts (each independent of the others; one packed forward per
  // step for all of them). Throws mosaic::Error for bad options, a prompt too long, a text
  // prompt without a tokenizer.
  std::vector<GenerateResult> generate(std::span<const GenerateRequest> requests,
                                       const GenerationOptions& options,
                                       const GenerateCallback& on_step = {}) const;

  // A continuous batch: requests join and leave between steps (mosaic/batch_session.h).
  std::unique_ptr<BatchSession> start_batch() const;

  // The options checked for this model, with what depends on it filled in (block length, EOS and
  // end-of-turn ids): what generate() and BatchSession run with. Throws mosaic::Error naming the
  // option that is wrong.
  GenerationOptions resolve_options(const GenerationOptions& options) const;
  // Whether `options` (as resolve_options returns them) can infill between the prompt and a
  // suffix of `suffix_tokens` (docs/design/infilling.md): full attention, no KV cache, no CFG.
  // Throws OptionError ("suffix") naming what is in the way; nothing for suffix_tokens 0.
  void check_suffix(const GenerationOptions& options, int64_t suffix_tokens) const;
  // Whether one request's largest step fits the memory budget on its own, by the plan. Throws
  // mosaic::Error for invalid options.
  MemoryFit fit(int64_t prompt_tokens, const GenerationOptions& options) const;

  bool has_tokenizer() const;
  // Special-token text in `text` (and in chat turns) is plain text unless `parse_special`: a
  // user who types "<|mdm_mask|>" gets those characters, not the mask token. The chat format's
  // own markup is always its special tokens.
  std::vector<int32_t> encode(const std::string& text, bool chat, bool parse_special = false) const;
  // A conversation in the model's chat format, ending with the assistant's turn to answer.
  std::vector<int32_t> encode_chat(std::span<const ChatTurn> turns, bool parse_special = false) const;
  std::string decode(std::span<const int32_t> ids) const;  // special tokens skipped
  // The answer in a generated region: the tokens before the first EOS / end of turn, masks left
  // out (`options` as resolve_options returns them). GenerateResult::text decodes these.
  std::vector<int32_t> answer_ids(std::span<const int32_t> output_ids, const GenerationOptions& options) const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic
