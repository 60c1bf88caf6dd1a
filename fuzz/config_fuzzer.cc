// libFuzzer target: config.json parsing must turn any text into either a consistent
// ModelConfig or a mosaic::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const mosaic::ModelConfig config = mosaic::parse_model_config(text, "fuzz.json");
    // Invariants every accepted config must satisfy (the loader and planner rely on them).
    if (config.hidden <= 0 || config.heads <= 0 || config.kv_heads <= 0 ||
        config.heads % config.kv_heads != 0 || config.head_dim * config.heads != config.hidden ||
        config.head_dim % 2 != 0 || config.vocab <= 0 ||
        // A dense model's FFN width; a mixture of experts' experts (its dense width is unused).
        (config.experts == 0 ? config.ffn <= 0
                             : config.experts_per_token < 1 || config.experts_per_token > config.experts ||
                                   config.expert_ffn <= 0 || config.ffn < 0) ||
        // LLaDA 2.x: dense layers have a width, the router's groups divide the experts in runs
        // of at least 2 and keep enough of them, RoPE turns an even part of a head.
        (config.dense_layers > 0 && config.ffn <= 0) || config.dense_layers > config.layers ||
        (config.router == mosaic::RouterKind::sigmoid_grouped &&
         (config.router_groups < 1 || config.experts % config.router_groups != 0 ||
          config.experts / config.router_groups < 2 || config.router_top_groups < 1 ||
          config.router_top_groups > config.router_groups ||
          config.experts_per_token > config.router_top_groups * (config.experts / config.router_groups))) ||
        config.shared_expert_ffn < 0 || config.rotary() < 2 || config.rotary() % 2 != 0 ||
        config.rotary() > config.head_dim ||
        config.mask_token_id >= config.vocab || config.eos_token_id >= config.vocab ||
        config.pad_token_id >= config.vocab || config.layers <= 0)
      __builtin_trap();
  } catch (const mosaic::Error&) {
  }
  return 0;
}
