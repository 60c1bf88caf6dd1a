// mosaic serve: an OpenAI-compatible HTTP server with step-level continuous batching.
#include <fmt/format.h>

#include <sys/resource.h>

#include <charconv>
#include <optional>
#include <cstdio>
#include <filesystem>

#include "cli/builtin_model.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/d2f_flags.h"
#include "cli/streamed_layers_flag.h"
#include "cli/parallel_flags.h"
#include "core/error.h"
#include "mosaic/device.h"
#include "mosaic/engine.h"
#include "serve/http_server.h"
#include "serve/shutdown_signals.h"

namespace mosaic::cli {
namespace {

struct ServeCliOptions {
  std::string model, model_name, budget, device = "auto", batching = "continuous", batch_timeout = "auto",
      cache = "auto", allowed_origins, adapter;
  serve::ServeOptions serve;
  int64_t gen_length = 128, steps = 0;
  int64_t streamed_layers = kAutoStreamedLayers;  // the last N layers' weights in pinned host memory (CUDA)
  int64_t tensor_parallel = 1;  // ranks splitting the model (docs/design/tensor-parallel.md)
  int64_t context_parallel = 1;  // ranks splitting a step's rows (docs/design/context-parallel.md)
  bool no_access_log = false;
  D2fFlags d2f;  // serve --d2f: the default decoding of requests
};

// Every connection is a file descriptor: make sure --max-connections of them can be open, raising
// the soft limit toward the hard one if need be (the model's files and the process need some too).
void ensure_descriptors_for(size_t connections) {
  constexpr rlim_t kSpare = 256;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t needed = static_cast<rlim_t>(connections) + kSpare;
  if (limit.rlim_cur >= needed) return;
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= needed) {
    limit.rlim_cur = needed;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  }
  fail("--max-connections {} needs {} open files, but this process may open only {} (ulimit -n); lower "
       "--max-connections or raise the limit", connections, static_cast<uint64_t>(needed),
       static_cast<uint64_t>(limit.rlim_max == RLIM_INFINITY ? limit.rlim_cur : limit.rlim_max));
}

// --batch-timeout: "auto" or milliseconds >= 0.
std::optional<double> parse_batch_timeout(const std::string& text) {
  if (text == "auto") return std::nullopt;
  double ms = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (error != std::errc() || end != text.data() + text.size() || !(ms >= 0))
    fail("--batch-timeout: expected auto or milliseconds >= 0, got '{}'", text);
  return ms / 1000.0;
}

int run_serve(ServeCliOptions& o) {
  serve::block_shutdown_signals();  // before any thread starts, so that only the waiter hears them
  serve::ServeOptions& s = o.serve;
  s.scheduler.mode = o.batching == "fixed" ? serve::BatchingMode::fixed : serve::BatchingMode::continuous;
  s.scheduler.batch_timeout_s = parse_batch_timeout(o.batch_timeout);
  if (s.scheduler.mode == serve::BatchingMode::continuous && o.batch_timeout != "auto")
    fail("--batch-timeout applies to --batching fixed");
  s.limits.default_gen_length = o.gen_length;
  s.limits.default_cache = o.cache == "none"     ? CacheMode::none
                           : o.cache == "prefix" ? CacheMode::prefix
                           : o.cache == "dual"   ? CacheMode::dual
                                                 : CacheMode::automatic;
  if (o.steps > 0) s.limits.default_steps = o.steps;
  s.limits.default_d2f = o.d2f.resolve();
  if (o.gen_length > s.limits.max_gen_length)
    fail("--gen-length {} exceeds --max-gen-length {}", o.gen_length, s.limits.max_gen_length);
  if (s.header_timeout_s > s.request_timeout_s)
    fail("--header-timeout {} s exceeds --request-timeout {} s (the head is part of the request)", s.header_timeout_s,
         s.request_timeout_s);
  s.cors = serve::CorsPolicy::parse(o.allowed_origins);
  s.access_log = !o.no_access_log;
  ensure_descriptors_for(s.max_connections);

  EngineOptions engine_options;
  engine_options.device = o.device;
  if (!o.adapter.empty()) engine_options.adapter = o.adapter;
  engine_options.streamed_layers = o.streamed_layers;
  engine_options.tensor_parallel = o.tensor_parallel;
  engine_options.context_parallel = o.context_parallel;
  if (!o.budget.empty()) {
    engine_options.budget = parse_byte_size(o.budget, "--budget");
  } else if (o.device != "cpu") {
    // On a GPU, admission by plan needs a budget: default to 90% of the device's memory.
    if (const auto gpu = visible_gpu(0)) engine_options.budget = gpu->total_bytes / 10 * 9;
  }
  const std::string model = o.model.empty() ? builtin_model_dir().string() : o.model;
  const auto engine = Engine::open(model, engine_options);
  s.model_name = o.model_name.empty() ? std::filesystem::path(model).lexically_normal().filename().string()
                                      : o.model_name;
  if (s.model_name.empty()) s.model_name = "mosaic";

  serve::HttpServer server(*engine, s);
  const int port = server.bind();
  const ModelInfo& info = engine->info();
  fmt::print(stderr, "mosaic serve: {} ({}, {}{}) on {}, {} batching, budget {}{}{}; listening on http://{}:{}\n",
             s.model_name, info.family, info.architecture,
             info.adapter.empty() ? "" : fmt::format(", adapter {}", info.adapter), info.device, o.batching,
             engine_options.budget ? fmt::format("{} bytes", *engine_options.budget) : std::string("none"),
             s.api_key.empty() ? "" : ", API key required", s.cors.enabled() ? ", CORS on" : "", s.host, port);
  std::fflush(stderr);
  serve::ShutdownSignalWaiter signals([&] { server.shutdown(false); }, [&] { server.shutdown(true); });
  server.serve();
  fmt::print(stderr, "mosaic serve: stopped\n");
  return 0;
}

}  // namespace

Action register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeCliOptions>();
  serve::ServeOptions& s = o->serve;
  CLI::App* c = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI-compatible) with step-level batching");
  c->add_option("--model", o->model, "Hugging Face model folder (default: the built-in model)");
  c->add_option("--adapter", o->adapter,
                "PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors), merged at load");
  add_streamed_layers_flag(c, o->streamed_layers);
  add_tensor_parallel_flag(c, o->tensor_parallel);
  add_context_parallel_flag(c, o->context_parallel);
  c->add_option("--model-name", o->model_name, "Name clients use (default: the folder's name)");
  c->add_option("--host", s.host, "Address to listen on")->default_val("127.0.0.1");
  c->add_option("--port", s.port, "Port (0: any free port)")->default_val(8000)->check(CLI::Range(0, 65535));
  c->add_option("--batching", o->batching, "continuous | fixed")->check(CLI::IsMember({"continuous", "fixed"}));
  c->add_option("--max-batch", s.scheduler.max_batch,
                "Most requests per step (continuous: 0 = the memory plan alone decides; fixed: default 16)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--max-queue", s.scheduler.max_queue, "Requests waiting beyond the batch; more get 429")
      ->default_val(64)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--batch-timeout", o->batch_timeout, "Fixed batching: MS to wait for a full batch, or auto");
  c->add_option("--gen-length", o->gen_length, "Tokens to generate when a request does not say")
      ->default_val(128)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--steps", o->steps, "Denoising steps when a request does not say (default: its gen_length)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--max-gen-length", s.limits.max_gen_length, "Largest gen_length / max_tokens accepted")
      ->default_val(4096)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--cache", o->cache,
                "KV cache of requests that do not say: auto (block-causal models: their exact block cache; "
                "else none) | none | prefix | dual")
      ->check(CLI::IsMember({"auto", "none", "prefix", "dual"}));
  o->d2f.add_to(c, "Decode requests that do not say by D2F (\"d2f\": false opts out)", "D2F default: ");
  c->add_option("--budget", o->budget, "Memory for weights + activations, e.g. 24GiB (GPU default: 90% of it)");
  c->add_option("--device", o->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  c->add_flag("--allow-long-context", s.allow_long_context, "Accept requests beyond the model's trained context");
  c->add_option("--threads", s.threads, "HTTP worker threads (default: enough for every queued request)")
      ->check(CLI::Range(0, 4096));
  c->add_option("--api-key", s.api_key,
                "Require 'Authorization: Bearer KEY' on every route but /health (prefer the environment variable: "
                "a command line is visible to other users)")
      ->envname("MOSAIC_API_KEY");
  c->add_option("--allowed-origins", o->allowed_origins,
                "CORS: origins allowed to call from a browser, comma-separated (https://app.example), or * "
                "(default: none)");
  c->add_option("--max-connections", s.max_connections,
                "Client connections open at once; at the limit a new one evicts an idle or slow one")
      ->default_val(512)
      ->check(CLI::Range(1, 1 << 20));
  c->add_option("--header-timeout", s.header_timeout_s, "Seconds a client may take to send a request's head")
      ->default_val(10)
      ->check(CLI::Range(0.05, 3600.0));
  c->add_option("--request-timeout", s.request_timeout_s,
                "Seconds a client may take to send a whole request (head and body)")
      ->default_val(30)
      ->check(CLI::Range(0.05, 3600.0));
  c->add_option("--keep-alive-timeout", s.idle_timeout_s, "Seconds an idle keep-alive connection stays open")
      ->default_val(5)
      ->check(CLI::Range(0.05, 3600.0));
  c->add_flag("--no-access-log", o->no_access_log, "Do not write one line per request to stderr");
  return [o] { return run_serve(*o); };
}

}  // namespace mosaic::cli
