#include "model/test_model.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/philox.h"
#include "core/printable.h"
#include "model/config_json.h"
#include "model/safetensors.h"
#include "model/weight_names.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;

struct Distribution {
  float mean = 0, std = 1;
};

Distribution init_distribution(const WeightSpec& spec) {
  switch (spec.role) {
    case WeightRole::embedding: return {0.0f, 1.0f};
    case WeightRole::attn_norm:
    case WeightRole::ffn_norm:
    case WeightRole::q_norm:
    case WeightRole::k_norm:
    case WeightRole::final_norm: return {1.0f, 0.1f};
    case WeightRole::q_bias:
    case WeightRole::k_bias:
    case WeightRole::v_bias: return {0.0f, 0.5f};
    // Against sigmoid scores in (0, 1): enough to change some choices, not to decide them all.
    case WeightRole::router_bias: return {0.0f, 0.1f};
    default: return {0.0f, 1.0f / std::sqrt(static_cast<float>(weight_fan_in(spec)))};
  }
}

// Element `index` of tensor `tensor_id`: a pure function of (seed, tensor_id, index), so the
// result does not depend on threads or on how tensors are split into shards.
void fill_random(std::byte* out, int64_t count, DType dtype, Distribution dist, uint64_t seed,
                 uint32_t tensor_id) {
  const PhiloxKey key = philox_key(seed);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const PhiloxCounter words = philox4x32_10(
        {static_cast<uint32_t>(i), static_cast<uint32_t>(uint64_t(i) >> 32), tensor_id, 0x7e57u},
        key);
    const float value = dist.mean + dist.std * normal_f32(words[0], words[1]);
    switch (dtype) {
      case DType::f32: std::memcpy(out + 4 * i, &value, 4); break;
      case DType::bf16: {
        const uint16_t bits = f32_to_bf16(value);
        std::memcpy(out + 2 * i, &bits, 2);
        break;
      }
      case DType::f16: {
        const uint16_t bits = f32_to_f16(value);
        std::memcpy(out + 2 * i, &bits, 2);
        break;
      }
      default: break;
    }
  }
}

// The stored dtype of a tensor: the checkpoint's, except the router's expert bias, which the
// LLaDA 2.x checkpoints keep in fp32 (a buffer, not a parameter) and a loader must not round.
DType stored_dtype(const WeightSpec& spec, DType checkpoint) {
  return spec.role == WeightRole::router_bias ? DType::f32 : checkpoint;
}

uint64_t spec_bytes(const WeightSpec& spec, DType checkpoint) {
  uint64_t bytes = dtype_size(stored_dtype(spec, checkpoint));
  for (int64_t extent : spec.shape) bytes *= static_cast<uint64_t>(extent);
  return bytes;
}

void write_all(std::ofstream& file, const void* data, uint64_t bytes, const fs::path& path) {
  file.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!file) fail("{}: write failed (disk full?)", printable_path(path));
}

std::string shard_name(int index, int count) {
  return count == 1 ? std::string("model.safetensors")
                    : fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

}  // namespace

ModelConfig test_model_preset(Family family, std::string_view preset) {
  ModelConfig c;
  c.family = family;
  c.torch_dtype = "bfloat16";
  if (family == Family::llada) {
    c.architecture = "LLaDAModelLM";
    c.rope_theta = 500000.0;
    c.rms_eps = 1e-5;
    c.qkv_bias = false;
    if (preset == "tiny") {
      c.hidden = 256, c.layers = 2, c.heads = 4, c.kv_heads = 4, c.ffn = 768, c.vocab = 1024;
      c.mask_token_id = 1000, c.eos_token_id = 1001, c.pad_token_id = 1001, c.max_position = 4096;
    } else if (preset == "llada-8b") {
      c.hidden = 4096, c.layers = 32, c.heads = 32, c.kv_heads = 32, c.ffn = 12288;
      c.vocab = 126464, c.mask_token_id = 126336, c.eos_token_id = 126081;
      c.pad_token_id = 126081, c.max_position = 4096;
    } else {
      fail("unknown preset '{}' for family llada (expected tiny or llada-8b)", preset);
    }
  } else if (family == Family::dream) {
    c.architecture = "DreamModel";
    c.rope_theta = 1000000.0;
    c.rms_eps = 1e-6;
    c.qkv_bias = true;
    if (preset == "tiny") {
      // 7 query heads per kv head, like the released Dream-7B.
      c.hidden = 448, c.layers = 2, c.heads = 7, c.kv_heads = 1, c.ffn = 1024, c.vocab = 1024;
      c.mask_token_id = 1000, c.eos_token_id = 1001, c.pad_token_id = 1001;
      c.max_position = 131072;
    } else if (preset == "dream-7b") {
      c.hidden = 3584, c.layers = 28, c.heads = 28, c.kv_heads = 4, c.ffn = 18944;
      c.vocab = 152064, c.mask_token_id = 151666, c.eos_token_id = 151643;
      c.pad_token_id = 151643, c.max_position = 131072;
    } else {
      fail("unknown preset '{}' for family dream (expected tiny or dream-7b)", preset);
    }
  } else if (family == Family::llada_moe) {
    c.architecture = "LLaDAMoEModelLM";
    c.rope_theta = 50000.0;
    c.rms_eps = 1e-5;
    c.qk_norm = true;
    if (preset == "tiny") {
      c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 4, c.vocab = 1024;
      c.experts = 8, c.experts_per_token = 2, c.expert_ffn = 96;
      c.mask_token_id = 1000, c.eos_token_id = 1001, c.pad_token_id = 1001, c.max_position = 8192;
    } else if (preset == "llada-moe-7b") {  // LLaDA-MoE-7B-A1B (moe-models.md 1.2)
      c.hidden = 2048, c.layers = 16, c.heads = 16, c.kv_heads = 16, c.vocab = 157184;
      c.experts = 64, c.experts_per_token = 8, c.expert_ffn = 1024, c.ffn = 8192;
      c.mask_token_id = 156895, c.eos_token_id = 156892, c.pad_token_id = 156892, c.max_position = 8192;
    } else {
      fail("unknown preset '{}' for family llada-moe (expected tiny or llada-moe-7b)", preset);
    }
  } else if (family == Family::llada2) {
    c.architecture = "LLaDA2MoeModelLM";
    c.rope_theta = 600000.0;
    c.rms_eps = 1e-6;
    c.qk_norm = true;
    c.router = RouterKind::sigmoid_grouped;
    c.routed_scaling = 2.5;
    c.dense_layers = 1;
    c.block_attention = BlockAttention::absolute;
    if (preset == "tiny") {
      c.hidden = 128, c.layers = 3, c.heads = 4, c.kv_heads = 2, c.ffn = 256, c.vocab = 1024;
      c.experts = 16, c.experts_per_token = 4, c.expert_ffn = 64, c.router_groups = 4, c.router_top_groups = 2;
      c.mask_token_id = 1000, c.eos_token_id = 1001, c.pad_token_id = 1001, c.max_position = 4096;
    } else if (preset == "llada2-mini") {  // LLaDA2.0-mini (moe-models.md 2.1)
      c.hidden = 2048, c.layers = 20, c.heads = 16, c.kv_heads = 4, c.ffn = 5120, c.vocab = 157184;
      c.experts = 256, c.experts_per_token = 8, c.expert_ffn = 512, c.router_groups = 8, c.router_top_groups = 4;
      c.mask_token_id = 156895, c.eos_token_id = 156892, c.pad_token_id = 156892, c.max_position = 16384;
    } else if (preset == "llada2-flash") {  // LLaDA2.0-flash
      c.hidden = 4096, c.layers = 32, c.heads = 32, c.kv_heads = 4, c.ffn = 9216, c.vocab = 157184;
      c.experts = 256, c.experts_per_token = 8, c.expert_ffn = 1024, c.router_groups = 8, c.router_top_groups = 4;
      c.mask_token_id = 156895, c.eos_token_id = 156892, c.pad_token_id = 156892, c.max_position = 16384;
    } else {
      fail("unknown preset '{}' for family llada2 (expected tiny, llada2-mini or llada2-flash)", preset);
    }
    c.shared_expert_ffn = c.expert_ffn;  // one shared expert
    c.partial_rotary = 0.5;
  } else {
    fail("make-test-model supports the llada, dream, llada-moe and llada2 families");
  }
  c.head_dim = c.hidden / c.heads;
  return c;
}

void write_test_model(const ModelConfig& config, const TestModelOptions& options,
                      const fs::path& out) {
  if (!dtype_is_weight_float(options.dtype))
    fail("test model dtype must be fp32, fp16 or bf16, got {}", dtype_name(options.dtype));
  if (options.shards < 1) fail("--shards must be at least 1, got {}", options.shards);
  // Round-trip the config through the parser: it validates the dimensions the caller chose.
  ModelConfig written = config;
  written.torch_dtype = options.dtype == DType::f32   ? "float32"
                        : options.dtype == DType::f16 ? "float16"
                                                      : "bfloat16";
  const std::string config_text = model_config_to_json(written).dump(2) + "\n";
  parse_model_config(config_text, "generated config.json");

  const std::vector<WeightSpec> specs = family_weight_specs(written);
  if (options.shards > static_cast<int>(specs.size()))
    fail("--shards {} exceeds the number of tensors ({})", options.shards, specs.size());
  std::error_code error;
  fs::create_directories(out, error);
  if (error) fail("{}: cannot create directory: {}", printable_path(out), error.message());
  {
    std::ofstream file(out / "config.json");
    file << config_text;
    if (!file) fail("{}: write failed", printable_path(out / "config.json"));
  }

  uint64_t total = 0;
  for (const WeightSpec& spec : specs) total += spec_bytes(spec, options.dtype);

  // Contiguous runs of tensors, each shard close to total / shards bytes.
  std::vector<size_t> shard_begin{0};
  uint64_t running = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const int shard = static_cast<int>(shard_begin.size()) - 1;
    const size_t remaining_tensors = specs.size() - i;
    const int remaining_shards = options.shards - 1 - shard;
    if (shard + 1 < options.shards && i > shard_begin.back() &&
        (running * options.shards >= total * uint64_t(shard + 1) ||
         remaining_tensors == size_t(remaining_shards)))
      shard_begin.push_back(i);
    running += spec_bytes(specs[i], options.dtype);
  }
  shard_begin.push_back(specs.size());
  MOSAIC_ASSERT(static_cast<int>(shard_begin.size()) == options.shards + 1);

  nlohmann::ordered_json weight_map;
  uint64_t written_bytes = 0;
  for (int shard = 0; shard < options.shards; ++shard) {
    std::vector<SafetensorsTensorSpec> layout_specs;
    for (size_t i = shard_begin[shard]; i < shard_begin[shard + 1]; ++i)
      layout_specs.push_back({specs[i].name, stored_dtype(specs[i], options.dtype), specs[i].shape});
    const SafetensorsLayout layout = layout_safetensors(layout_specs, {{"format", "pt"}});
    const fs::path path = out / shard_name(shard, options.shards);
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) fail("{}: cannot create file", printable_path(path));
    write_all(file, layout.header.data(), layout.header.size(), path);
    std::vector<std::byte> buffer;
    for (size_t i = shard_begin[shard]; i < shard_begin[shard + 1]; ++i) {
      const uint64_t bytes = spec_bytes(specs[i], options.dtype);
      buffer.resize(bytes);
      const DType dtype = stored_dtype(specs[i], options.dtype);
      fill_random(buffer.data(), static_cast<int64_t>(bytes / dtype_size(dtype)), dtype,
                  init_distribution(specs[i]), options.seed, static_cast<uint32_t>(i));
      write_all(file, buffer.data(), bytes, path);
      weight_map[specs[i].name] = path.filename().string();
      written_bytes += bytes;
      if (options.progress) options.progress(written_bytes, total);
    }
  }
  if (options.shards > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    std::ofstream file(out / "model.safetensors.index.json");
    file << index.dump(2) << "\n";
    if (!file) fail("{}: write failed", printable_path(out / "model.safetensors.index.json"));
  }
}

}  // namespace mosaic
