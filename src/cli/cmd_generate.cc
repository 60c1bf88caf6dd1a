// mosaic generate: text (or token ids) in, text out, with the reference generation algorithms.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "core/json_dump.h"
#include "cli/byte_size.h"
#include "cli/builtin_model.h"
#include "cli/commands.h"
#include "cli/d2f_flags.h"
#include "cli/list_parse.h"
#include "cli/progress.h"
#include "cli/streamed_layers_flag.h"
#include "cli/parallel_flags.h"
#include "core/error.h"
#include "mosaic/engine.h"
#include "tokenizer/chat_template.h"

namespace mosaic::cli {
namespace {

struct GenerateCliOptions {
  std::string model;
  std::vector<std::string> prompts, ids;
  std::string prompt_file, budget, remasking = "low_confidence", alg = "origin", device = "auto", cache = "auto";
  std::string adapter;  // PEFT LoRA folder merged at load
  int64_t streamed_layers = kAutoStreamedLayers;  // the last N layers' weights in pinned host memory (CUDA)
  int64_t tensor_parallel = 1;  // ranks splitting the model (docs/design/tensor-parallel.md)
  int64_t context_parallel = 1;  // ranks splitting a step's rows (docs/design/context-parallel.md)
  std::string suffix;  // infilling: text after the generated span (docs/design/infilling.md)
  bool chat = false, json = false, visual = false, quiet = false, allow_long_context = false;
  GenerationOptions gen;
  D2fFlags d2f;
  std::string seed = "0";
  // Options that are unset unless given (any value given, even a nonsensical one, is passed on
  // for the engine to check and name).
  double alg_temp = 0, top_p = 0, threshold = 0, factor = 0;
  int64_t top_k = 0, eot_id = 0;
  TokenEditing editing;  // LLaDA 2.1: on when any of its options is given
  CLI::Option *alg_temp_given = nullptr, *top_p_given = nullptr, *top_k_given = nullptr,
              *threshold_given = nullptr, *factor_given = nullptr, *eot_id_given = nullptr,
              *budget_given = nullptr, *block_length_given = nullptr, *steps_given = nullptr,
              *editing_given[3] = {nullptr, nullptr, nullptr};
};

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --chat wraps the prompt in the family's chat markup, whose markers are special tokens of an
// instruct model's tokenizer. A tokenizer without them (a base or completion model, such as the
// built-in one) would spell them out as plain text: dozens of tokens of noise, no chat.
void check_chat_format(const Engine& engine) {
  const std::optional<ChatFormat> format = chat_format_for_architecture(engine.info().architecture);
  if (!format) return;  // encoding the chat names the architecture that has none
  const std::string marker(chat_specials(*format).marker);
  if (engine.has_tokenizer() && engine.encode(marker, false, /*parse_special=*/true).size() != 1)
    fail("--chat: this model's tokenizer has no {} token, so the model has no chat format (it is a completion "
         "model, as the built-in one is): drop --chat and give the text to continue",
         marker);
}

std::vector<GenerateRequest> build_requests(const GenerateCliOptions& o) {
  std::vector<GenerateRequest> requests;
  for (const std::string& text : o.prompts) requests.push_back({text, o.chat, {}});
  for (const std::string& list : o.ids) requests.push_back({"", false, parse_int_list(list, "--ids")});
  if (o.chat && !o.ids.empty())
    fail("--chat wraps text in the model's chat format; --ids are token ids already (drop one of them)");
  if (!o.prompt_file.empty()) {
    std::error_code error;
    const auto status = std::filesystem::status(o.prompt_file, error);
    if (error || !std::filesystem::exists(status)) fail("--prompt-file: '{}' does not exist", o.prompt_file);
    if (!std::filesystem::is_regular_file(status))
      fail("--prompt-file: '{}' is not a regular file (a directory or a device?)", o.prompt_file);
    std::ifstream file(o.prompt_file, std::ios::binary);
    if (!file) fail("--prompt-file: cannot open '{}' (permissions?)", o.prompt_file);
    requests.push_back({read_all(file), o.chat, {}});
  }
  if (requests.empty()) {
    if (isatty(fileno(stdin))) fail("no prompt: give --prompt TEXT, --prompt-file FILE, --ids, or pipe text to stdin");
    requests.push_back({read_all(std::cin), o.chat, {}});
  }
  for (size_t r = 0; r < requests.size(); ++r)
    if (requests[r].prompt_ids.empty() && requests[r].prompt.empty()) fail("prompt {} is empty", r);
  for (GenerateRequest& request : requests) request.suffix = o.suffix;
  return requests;
}

// Mask positions drawn as a shaded block, the rest as decoded text (or ids without tokenizer).
std::string render_canvas(const Engine& engine, std::span<const int32_t> output) {
  const int64_t mask = engine.info().mask_token_id;
  std::string line;
  for (const int32_t id : output) {
    if (id == mask) line += "\u2591";
    else if (engine.has_tokenizer()) line += engine.decode(std::span(&id, 1));
    else line += fmt::format("{} ", id);
  }
  for (char& c : line) if (c == '\n') c = ' ';
  return line;
}

int run_generate(GenerateCliOptions& o) {
  EngineOptions engine_options;
  engine_options.device = o.device;
  if (given(o.budget_given)) engine_options.budget = parse_byte_size(o.budget, "--budget");
  if (!o.adapter.empty()) engine_options.adapter = o.adapter;
  engine_options.streamed_layers = o.streamed_layers;
  engine_options.tensor_parallel = o.tensor_parallel;
  engine_options.context_parallel = o.context_parallel;
  if (o.model.empty()) o.model = builtin_model_dir().string();
  const auto engine = Engine::open(o.model, engine_options);
  GenerationOptions& gen = o.gen;
  const auto remasking = o.remasking == "random" ? Remasking::random : Remasking::low_confidence;
  gen.remasking = remasking;
  gen.cache = o.cache == "none"     ? CacheMode::none
              : o.cache == "prefix" ? CacheMode::prefix
              : o.cache == "dual"   ? CacheMode::dual
                                    : CacheMode::automatic;
  if (o.alg == "maskgit_plus") gen.alg = DreamAlg::maskgit_plus;
  else if (o.alg == "topk_margin") gen.alg = DreamAlg::topk_margin;
  else if (o.alg == "entropy") gen.alg = DreamAlg::entropy;
  gen.seed = parse_uint64(o.seed, "--seed");
  if (given(o.alg_temp_given)) gen.alg_temp = o.alg_temp;
  if (given(o.top_p_given)) gen.top_p = o.top_p;
  if (given(o.top_k_given)) gen.top_k = o.top_k;
  if (given(o.threshold_given)) gen.threshold = o.threshold;
  if (given(o.factor_given)) gen.factor = o.factor;
  if (std::any_of(std::begin(o.editing_given), std::end(o.editing_given), given)) gen.editing = o.editing;
  gen.d2f = o.d2f.resolve();
  if (gen.d2f && given(o.steps_given)) gen.d2f->max_steps = gen.steps;  // D2F's steps: the loop's cap
  // One step per position at most (a step unmasks at least one): the default of 128 shrinks with
  // a shorter generation; a --steps beyond gen_length is refused by name.
  if (!given(o.steps_given)) gen.steps = std::min<int64_t>(gen.steps, gen.gen_length);
  if (given(o.block_length_given) && gen.block_length < 1)  // the library reads 0 as "no blocks given"
    fail("--block-length must be at least 1, got {}", gen.block_length);
  if (given(o.eot_id_given)) {
    if (o.eot_id < 0) fail("--eot-id must be a token id (>= 0), got {}", o.eot_id);
    gen.eot_id = o.eot_id;
  }
  engine->resolve_options(gen);  // every option checked (and named) before any prompt is read

  const std::vector<GenerateRequest> requests = build_requests(o);
  if (o.chat) check_chat_format(*engine);
  const ModelInfo& info = engine->info();
  for (size_t r = 0; r < requests.size(); ++r) {
    // The suffix's tokens take context like the prompt's.
    const int64_t prompt = (requests[r].prompt_ids.empty()
                                ? static_cast<int64_t>(engine->encode(requests[r].prompt, requests[r].chat).size())
                                : static_cast<int64_t>(requests[r].prompt_ids.size())) +
                           (o.suffix.empty() ? 0 : static_cast<int64_t>(engine->encode(o.suffix, false).size()));
    // gen_length is bounded by kMaxStepPositions once resolved: the sum cannot overflow.
    if (info.max_position > 0 && prompt + gen.gen_length > info.max_position && !o.allow_long_context)
      fail("prompt {} ({} tokens) + --gen-length {} = {} exceeds the model's context of {} tokens; "
           "shorten them or pass --allow-long-context",
           r, prompt, gen.gen_length, prompt + gen.gen_length, info.max_position);
  }

  const bool terminal = isatty(fileno(stderr));
  Progress progress(!o.quiet && !o.json && !o.visual, terminal);
  int64_t committed_total = 0, previous_lines = 0;
  const auto on_step = [&](const GenerateEvent& event) {
    committed_total += static_cast<int64_t>(event.committed.size());
    if (o.visual) {
      const std::string line = fmt::format("[req {} step {:>4}] {}", event.request, event.step,
                                           render_canvas(*engine, event.output_ids));
      if (terminal && requests.size() == 1) {
        if (previous_lines > 0) fmt::print(stderr, "\r\x1b[2K");
        fmt::print(stderr, "{}", line.substr(0, 4000));
        previous_lines = 1;
      } else {
        fmt::print(stderr, "{}\n", line);
      }
    }
    if (gen.d2f) progress.update_by_tokens(event.step, committed_total, gen.gen_length * std::ssize(requests));
    else progress.update(event.step, gen.steps, committed_total);
    return true;
  };
  const std::vector<GenerateResult> results = engine->generate(requests, gen, on_step);
  progress.finish();
  if (o.visual && terminal && requests.size() == 1) fmt::print(stderr, "\n");

  if (o.json) {
    nlohmann::ordered_json report;
    report["model"] = {{"path", o.model}, {"family", info.family}};
    report["device"] = info.device;
    for (const GenerateResult& r : results)
      report["results"].push_back({{"prompt_ids", r.prompt_ids}, {"output_ids", r.output_ids},
                                   {"text", r.text}, {"steps", r.steps}, {"forwards", r.forwards},
                                   {"cache", r.cache},
                                   {"stopped_at_eos", r.stopped_at_eos},
                                   {"tokens_per_step", r.tokens_per_step}, {"seconds", r.seconds}});
    std::puts(dump_json(report, 2).c_str());
    return 0;
  }
  for (size_t r = 0; r < results.size(); ++r) {
    if (results.size() > 1) fmt::print("=== {}\n", r);
    if (engine->has_tokenizer()) fmt::print("{}\n", results[r].text);
    else fmt::print("{}\n", fmt::join(results[r].output_ids, ","));
  }
  if (!o.quiet)
    fmt::print(stderr, "{} request{}, {} steps ({} forwards) in {:.2f} s\n", results.size(),
               results.size() == 1 ? "" : "s", results.front().steps, results.front().forwards,
               results.front().seconds);
  return 0;
}

}  // namespace

Action register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateCliOptions>();
  GenerationOptions& g = o->gen;
  CLI::App* c = app.add_subcommand("generate", "Generate text with a masked diffusion model");
  c->add_option("--model", o->model,
                "Hugging Face model folder (default: the built-in model, models/kjv-llada-12m)");
  c->add_option("--adapter", o->adapter,
                "PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors), merged at load");
  add_streamed_layers_flag(c, o->streamed_layers);
  add_tensor_parallel_flag(c, o->tensor_parallel);
  add_context_parallel_flag(c, o->context_parallel);
  c->add_option("--prompt", o->prompts, "Prompt text (repeat for a batch); default: stdin");
  c->add_option("--prompt-file", o->prompt_file, "Read the prompt from a file");
  c->add_option("--ids", o->ids, "Prompt as token ids, e.g. 1,2,3 (repeat for a batch)");
  c->add_flag("--chat", o->chat, "Wrap the prompt in the model's chat format");
  c->add_option("--suffix", o->suffix, "Infilling: text after the generated span, which fills the gap");
  c->add_option("--gen-length", g.gen_length, "Tokens to generate")->default_val(128);
  o->steps_given = c->add_option("--steps", g.steps, "Denoising steps (default: 128, or gen-length if fewer)")
                       ->default_val(128);
  o->block_length_given = c->add_option("--block-length", g.block_length,
                "Semi-autoregressive block (LLaDA default: gen-length; Dream: decode in blocks)");
  c->add_option("--cache", o->cache,
                "KV cache: auto (block-causal models: their exact block cache; else none) | none | prefix | dual")
      ->check(CLI::IsMember({"auto", "none", "prefix", "dual"}));
  c->add_option("--temperature", g.temperature, "Sampling temperature (0: greedy)")->default_val(0.0);
  c->add_option("--seed", o->seed, "Random seed, an integer in [0, 2^64)")->default_val("0");
  c->add_option("--remasking", o->remasking, "LLaDA: low_confidence | random")
      ->check(CLI::IsMember({"low_confidence", "random"}));
  c->add_option("--cfg-scale", g.cfg_scale, "LLaDA: classifier-free guidance scale");
  c->add_flag("--logits-eos-inf", g.logits_eos_inf, "LLaDA: never generate EOS");
  c->add_flag("--confidence-eos-eot-inf", g.confidence_eos_eot_inf, "LLaDA: the reference's EoT/EOS confidence rule");
  c->add_option("--alg", o->alg, "Dream: origin | maskgit_plus | topk_margin | entropy")
      ->check(CLI::IsMember({"origin", "maskgit_plus", "topk_margin", "entropy"}));
  o->alg_temp_given = c->add_option("--alg-temp", o->alg_temp, "Dream: randomness in choosing positions");
  o->top_p_given = c->add_option("--top-p", o->top_p, "Dream: nucleus sampling mass");
  o->top_k_given = c->add_option("--top-k", o->top_k, "Dream: sample among the k most likely tokens");
  c->add_option("--eps", g.eps, "Dream: final timestep")->default_val(1e-3);
  o->threshold_given = c->add_option("--threshold", o->threshold, "Fast-dLLM: unmask every position this confident");
  o->factor_given = c->add_option("--factor", o->factor, "Fast-dLLM: the factor rule");
  o->editing_given[0] = c->add_option("--editing-threshold", o->editing.editing_threshold,
                                      "LLaDA 2.1: replace a placed token predicted otherwise this confidently (default 0.9)");
  o->editing_given[1] = c->add_option("--max-post-steps", o->editing.max_post_steps,
                                      "LLaDA 2.1: editing steps after a block's masks are gone (default 16)");
  o->editing_given[2] = c->add_option("--num-to-transfer", o->editing.num_to_transfer,
                                      "LLaDA 2.1: masks a step fills at least (default 1)");
  o->d2f.add_to(c,
                "D2F pipelined block decoding (a D2F adapter's model; blocks of --block-length, default 32; "
                "--steps caps its steps, default 10000)",
                "D2F: ");
  c->add_flag("--stop-at-eos", g.stop_at_eos, "Stop once the answer has ended");
  o->eot_id_given = c->add_option("--eot-id", o->eot_id, "End-of-turn token id (default: from the tokenizer)");
  o->budget_given = c->add_option("--budget", o->budget, "Memory for weights + activations, e.g. 8GiB");
  c->add_option("--device", o->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  c->add_flag("--allow-long-context", o->allow_long_context, "Run beyond the model's trained context");
  c->add_flag("--visual", o->visual, "Show the canvas as masks resolve (stderr)");
  c->add_flag("--json", o->json, "Print JSON");
  c->add_flag("--quiet", o->quiet, "No progress output");
  return [o] { return run_generate(*o); };
}

}  // namespace mosaic::cli
