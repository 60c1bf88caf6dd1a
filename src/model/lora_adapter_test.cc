// PEFT adapter folders: reading every key spelling, binding modules to a base checkpoint, the
// merge arithmetic, and the one-line refusals of damaged or mismatched adapters.
#include "model/lora_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/half.h"
#include "model/lora_merge.h"
#include "model/model_weights.h"
#include "model/safetensors.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

struct Matrix {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

Matrix ramp(int64_t rows, int64_t cols, float step) {
  Matrix m{{rows, cols}, {}};
  for (int64_t i = 0; i < rows * cols; ++i) m.values.push_back(step * static_cast<float>((i * 7) % 11 - 5));
  return m;
}

ModelConfig small_config(Family family) {
  ModelConfig c = test_model_preset(family, "tiny");
  c.hidden = 32, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 8, c.ffn = 48;
  c.vocab = 64, c.mask_token_id = 60, c.eos_token_id = 61, c.pad_token_id = 61;
  if (family == Family::llada2) c.expert_ffn = 16, c.shared_expert_ffn = 16;
  return c;
}

class LoraAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("mosaic_lora_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    base_ = root_ / "base";
    adapter_ = root_ / "adapter";
    fs::create_directories(adapter_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void write_base(Family family, DType dtype = DType::bf16) {
    TestModelOptions options;
    options.dtype = dtype;
    options.seed = 3;
    write_test_model(small_config(family), options, base_);
  }
  void write_config(const json& config) { std::ofstream(adapter_ / "adapter_config.json") << config.dump(2); }
  static json config(int64_t r, std::vector<std::string> targets) {
    return {{"peft_type", "LORA"}, {"r", r}, {"lora_alpha", 2 * r}, {"target_modules", targets},
            {"bias", "none"}, {"use_dora", false}, {"use_rslora", false}, {"fan_in_fan_out", false}};
  }
  void write_tensors(const std::map<std::string, Matrix>& tensors, DType dtype = DType::f32) {
    std::vector<SafetensorsTensorSpec> specs;
    for (const auto& [name, m] : tensors) specs.push_back({name, dtype, m.shape});
    const SafetensorsLayout layout = layout_safetensors(specs, {{"format", "pt"}});
    std::string bytes(layout.file_bytes, '\0');
    std::memcpy(bytes.data(), layout.header.data(), layout.header.size());
    size_t t = 0;
    for (const auto& [name, m] : tensors) {
      char* out = bytes.data() + layout.offsets[t++];
      for (size_t i = 0; i < m.values.size(); ++i) {
        if (dtype == DType::f32) std::memcpy(out + 4 * i, &m.values[i], 4);
        else { const uint16_t bits = f32_to_bf16(m.values[i]); std::memcpy(out + 2 * i, &bits, 2); }
      }
    }
    std::ofstream(adapter_ / "adapter_model.safetensors", std::ios::binary) << bytes;
  }
  // LoRA of rank r on q_proj and attn_out (o) of both layers of the small LLaDA.
  std::map<std::string, Matrix> llada_q_o(int64_t r, const std::string& prefix = "base_model.model.",
                                          const std::string& infix = "") {
    std::map<std::string, Matrix> t;
    for (int layer = 0; layer < 2; ++layer)
      for (const char* leaf : {"q_proj", "attn_out"}) {
        const std::string m = prefix + "model.transformer.blocks." + std::to_string(layer) + "." + leaf;
        t[m + ".lora_A" + infix + ".weight"] = ramp(r, 32, 0.01f * (layer + 1));
        t[m + ".lora_B" + infix + ".weight"] = ramp(32, r, 0.02f);
      }
    return t;
  }
  std::string load_error() {
    try {
      Model::load(base_, adapter_);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  fs::path root_;
  fs::path base_, adapter_;
};

TEST_F(LoraAdapterTest, MergesIntoFp32AndCountsTheMergedBytes) {
  write_base(Family::llada);
  write_config(config(4, {"q_proj", "attn_out"}));
  write_tensors(llada_q_o(4));
  const auto plain = Model::load(base_);
  const auto adapted = Model::load(base_, adapter_);
  EXPECT_EQ(adapted->adapted_projections(), 4u);
  const WeightView& q = adapted->weights().layers[1].q;
  EXPECT_EQ(q.dtype, DType::f32);
  EXPECT_EQ(adapted->weights().layers[1].k.dtype, DType::bf16);  // not targeted: the mapped base
  // 4 projections of [32, 32] now fp32 instead of bf16.
  EXPECT_EQ(adapted->weights().bytes, plain->weights().bytes + 4 * 32 * 32 * 2);

  // W' = W + (alpha / r) B @ A, element by element.
  const Matrix a = ramp(4, 32, 0.02f), b = ramp(32, 4, 0.02f);
  const auto* base = static_cast<const uint16_t*>(plain->weights().layers[1].q.data);
  const auto* merged = static_cast<const float*>(q.data);
  for (int64_t o = 0; o < 32; ++o)
    for (int64_t i = 0; i < 32; ++i) {
      double delta = 0;
      for (int64_t k = 0; k < 4; ++k) delta += double(b.values[o * 4 + k]) * a.values[k * 32 + i];
      EXPECT_NEAR(merged[o * 32 + i], bf16_to_f32(base[o * 32 + i]) + 2.0 * delta, 1e-6) << o << "," << i;
    }
}

TEST_F(LoraAdapterTest, AcceptsEveryPeftKeySpelling) {
  write_base(Family::llada);
  write_config(config(4, {"q_proj", "attn_out"}));
  write_tensors(llada_q_o(4));
  const auto reference = Model::load(base_, adapter_);
  const auto* want = static_cast<const float*>(reference->weights().layers[0].o.data);
  // ".default" adapter name; no "base_model.model."; the module path without "model.".
  for (const auto& [prefix, infix] : std::vector<std::pair<std::string, std::string>>{
           {"base_model.model.", ".default"}, {"", ""}, {"base_model.model.", ""}}) {
    std::map<std::string, Matrix> tensors;
    for (auto& [name, m] : llada_q_o(4, prefix, infix)) tensors[name] = m;
    write_tensors(tensors);
    const auto model = Model::load(base_, adapter_);
    EXPECT_EQ(std::memcmp(model->weights().layers[0].o.data, want, 32 * 32 * 4), 0) << prefix << infix;
  }
  std::map<std::string, Matrix> short_paths;
  for (auto& [name, m] : llada_q_o(4)) {
    std::string key = name;
    key.replace(key.find("model.model."), 12, "model.");  // base_model.model.transformer.blocks...
    short_paths[key] = m;
  }
  write_tensors(short_paths);
  const auto model = Model::load(base_, adapter_);
  EXPECT_EQ(std::memcmp(model->weights().layers[0].o.data, want, 32 * 32 * 4), 0);
}

TEST_F(LoraAdapterTest, AdaptsEveryDreamProjection) {
  write_base(Family::dream, DType::f32);
  json c = config(2, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"});
  c["use_rslora"] = true;
  write_config(c);
  std::map<std::string, Matrix> t;
  const ModelConfig mc = small_config(Family::dream);
  for (const WeightSpec& spec : family_weight_specs(mc)) {
    if (spec.shape.size() != 2 || spec.layer < 0) continue;
    const std::string m = "base_model.model." + spec.name.substr(0, spec.name.size() - 7);
    t[m + ".lora_A.weight"] = ramp(2, spec.shape[1], 0.01f);
    t[m + ".lora_B.weight"] = ramp(spec.shape[0], 2, 0.01f);
  }
  write_tensors(t);
  const auto model = Model::load(base_, adapter_);
  EXPECT_EQ(model->adapted_projections(), 14u);
  EXPECT_EQ(model->weights().layers[1].k.shape, (std::vector<int64_t>{16, 32}));
}

// LLaDA 2.x: an adapter on the fused QKV merges into it, and the q, k and v views are its rows.
TEST_F(LoraAdapterTest, AdaptsLlada2sFusedQkvAndItsOutputProjection) {
  write_base(Family::llada2);
  write_config(config(2, {"query_key_value", "dense"}));
  const int64_t fused = 32 + 2 * 16;  // 4 query heads and 2 kv heads of 8
  std::map<std::string, Matrix> t;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string m = "base_model.model.model.layers." + std::to_string(layer) + ".attention.";
    t[m + "query_key_value.lora_A.weight"] = ramp(2, 32, 0.01f);
    t[m + "query_key_value.lora_B.weight"] = ramp(fused, 2, 0.02f);
    t[m + "dense.lora_A.weight"] = ramp(2, 32, 0.01f);
    t[m + "dense.lora_B.weight"] = ramp(32, 2, 0.02f);
  }
  write_tensors(t);
  const auto plain = Model::load(base_);
  const auto adapted = Model::load(base_, adapter_);
  EXPECT_EQ(adapted->adapted_projections(), 4u);
  const LayerWeights& layer = adapted->weights().layers[1];
  ASSERT_EQ(layer.k.dtype, DType::f32);
  EXPECT_EQ(layer.k.data, static_cast<const float*>(layer.qkv.data) + 32 * 32);  // the key rows of the merge
  const Matrix a = ramp(2, 32, 0.01f), b = ramp(fused, 2, 0.02f);
  const auto* base = static_cast<const uint16_t*>(plain->weights().layers[1].qkv.data);
  const auto* k = static_cast<const float*>(layer.k.data);
  for (int64_t j = 0; j < 16; ++j)
    for (int64_t i = 0; i < 32; ++i) {
      const int64_t row = 32 + j;  // the fused tensor's row of key row j
      double delta = 0;
      for (int64_t r = 0; r < 2; ++r) delta += double(b.values[row * 2 + r]) * a.values[r * 32 + i];
      EXPECT_NEAR(k[j * 32 + i], bf16_to_f32(base[row * 32 + i]) + 2.0 * delta, 1e-6) << j << "," << i;
    }
}

// A mixture of experts: an adapter on one expert's projection merges into that expert alone.
TEST_F(LoraAdapterTest, AdaptsOneExpertOfEachLayer) {
  write_base(Family::llada_moe);
  write_config(config(2, {"mlp.experts.3.up_proj"}));
  const ModelConfig mc = small_config(Family::llada_moe);
  std::map<std::string, Matrix> t;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string m = "base_model.model.model.layers." + std::to_string(layer) + ".mlp.experts.3.up_proj";
    t[m + ".lora_A.weight"] = ramp(2, 32, 0.01f);
    t[m + ".lora_B.weight"] = ramp(mc.expert_ffn, 2, 0.02f);
  }
  write_tensors(t);
  const auto plain = Model::load(base_);
  const auto adapted = Model::load(base_, adapter_);
  EXPECT_EQ(adapted->adapted_projections(), 2u);
  const WeightView& up = expert_weight_of(adapted->weights(), 1, WeightRole::expert_up, 3);
  ASSERT_EQ(up.dtype, DType::f32);
  EXPECT_EQ(expert_weight_of(adapted->weights(), 1, WeightRole::expert_up, 2).dtype, DType::bf16);  // another expert
  const Matrix a = ramp(2, 32, 0.01f), b = ramp(mc.expert_ffn, 2, 0.02f);
  const auto* base = static_cast<const uint16_t*>(expert_weight_of(plain->weights(), 1, WeightRole::expert_up, 3).data);
  const auto* merged = static_cast<const float*>(up.data);
  for (int64_t o = 0; o < mc.expert_ffn; ++o)
    for (int64_t i = 0; i < 32; ++i) {
      double delta = 0;
      for (int64_t r = 0; r < 2; ++r) delta += double(b.values[o * 2 + r]) * a.values[r * 32 + i];
      EXPECT_NEAR(merged[o * 32 + i], bf16_to_f32(base[o * 32 + i]) + 2.0 * delta, 1e-6) << o << "," << i;
    }
}

TEST_F(LoraAdapterTest, RefusesDamagedOrMismatchedAdapters) {
  write_base(Family::llada);
  write_config(config(4, {"q_proj", "attn_out"}));

  auto tensors = llada_q_o(4);
  tensors.erase("base_model.model.model.transformer.blocks.1.attn_out.lora_B.weight");
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("missing tensor 'base_model.model.model.transformer.blocks.1.attn_out.lora_B.weight'"));

  tensors = llada_q_o(4);
  tensors.erase("base_model.model.model.transformer.blocks.1.attn_out.lora_A.weight");
  tensors.erase("base_model.model.model.transformer.blocks.1.attn_out.lora_B.weight");
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("missing tensors 'base_model.model.model.transformer.blocks.1.attn_out.lora_A.weight' "
                                      "and '.lora_B.weight' (target_modules selects"));

  tensors = llada_q_o(4);
  tensors["base_model.model.model.transformer.blocks.0.q_proj.lora_B.weight"] = ramp(16, 4, 0.1f);
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'base_model.model.model.transformer.blocks.0.q_proj.lora_B.weight' has "
                                      "shape [16, 4] but base 'model.transformer.blocks.0.q_proj.weight' [32, 32] "
                                      "needs lora_B [32, 4]"));

  tensors = llada_q_o(4);
  tensors["base_model.model.model.transformer.blocks.0.q_proj.lora_A.weight"] = ramp(4, 31, 0.1f);
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("needs lora_A [4, 32]"));

  write_tensors(llada_q_o(8));
  EXPECT_THAT(load_error(), HasSubstr("has rank 8 (shape [8, 32]) but adapter_config.json says r = 4: expected [4, 32]"));

  tensors = llada_q_o(4);
  tensors["base_model.model.model.transformer.blocks.0.self_attn.o_proj.lora_A.weight"] = ramp(4, 32, 0.1f);
  tensors["base_model.model.model.transformer.blocks.0.self_attn.o_proj.lora_B.weight"] = ramp(32, 4, 0.1f);
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("is for module 'model.transformer.blocks.0.self_attn.o_proj', which is no "
                                      "projection of this llada checkpoint"));

  tensors = llada_q_o(4);
  tensors["base_model.model.model.transformer.blocks.0.k_proj.lora_A.weight"] = ramp(4, 32, 0.1f);
  tensors["base_model.model.model.transformer.blocks.0.k_proj.lora_B.weight"] = ramp(32, 4, 0.1f);
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("target_modules does not select"));

  tensors = llada_q_o(4);
  tensors["base_model.model.model.transformer.blocks.0.q_proj.lora_magnitude_vector"] = ramp(1, 32, 0.1f);
  write_tensors(tensors);
  EXPECT_THAT(load_error(), HasSubstr("is not a LoRA weight"));

  write_tensors(llada_q_o(4));
  write_config(config(4, {"q_proj", "o_proj"}));
  EXPECT_THAT(load_error(), HasSubstr("target_modules entry 'o_proj' names no projection of this llada checkpoint "
                                      "(its projections: q_proj, k_proj, v_proj, attn_out, ff_proj, up_proj, ff_out"));

  write_config(config(0, {"q_proj"}));
  EXPECT_THAT(load_error(), HasSubstr("'r' must be a positive integer (the LoRA rank), got 0"));

  fs::remove(adapter_ / "adapter_model.safetensors");
  write_config(config(4, {"q_proj", "attn_out"}));
  std::ofstream(adapter_ / "adapter_model.bin") << "pickle";
  EXPECT_THAT(load_error(), HasSubstr("holds PyTorch adapter_model.bin; Mosaic reads safetensors"));
  fs::remove(adapter_ / "adapter_config.json");
  EXPECT_THAT(load_error(), HasSubstr("no adapter_config.json in this folder"));
}

TEST(LoraMerge, IsWPlusScalingTimesBA) {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<float> a = {1, 0, -1};          // [1, 3]
  const std::vector<float> b = {2, -3};             // [2, 1]
  const WeightView base{w.data(), DType::f32, {2, 3}, "w"};
  LoraModule module{"m", {"a", DType::f32, {1, 3}, reinterpret_cast<const std::byte*>(a.data())},
                    {"b", DType::f32, {2, 1}, reinterpret_cast<const std::byte*>(b.data())}};
  EXPECT_EQ(merge_lora(base, module, 0.5), (std::vector<float>{2, 2, 2, 2.5, 5, 7.5}));
}

}  // namespace
}  // namespace mosaic
