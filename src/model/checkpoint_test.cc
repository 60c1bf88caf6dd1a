// Loading real-layout folders and refusing every kind of damaged one with a message that names
// the file and the tensor or field.
#include "model/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"
#include "core/half.h"
#include "model/model_weights.h"
#include "model/safetensors.h"
#include "model/test_model.h"
#include "model/weight_names.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

ModelConfig small_config(Family family) {
  ModelConfig c = test_model_preset(family, "tiny");
  c.hidden = 64, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16, c.ffn = 96;
  c.vocab = 128, c.mask_token_id = 120, c.eos_token_id = 121, c.pad_token_id = 121;
  return c;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mosaic_checkpoint_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(Family family, int shards = 1, DType dtype = DType::bf16) {
    TestModelOptions options;
    options.shards = shards;
    options.dtype = dtype;
    options.seed = 5;
    write_test_model(small_config(family), options, dir_);
  }

  std::string load_error() {
    try {
      Model::load(dir_);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  // Rewrites model.safetensors with zero data for the given tensor list.
  void rewrite_single_file(const std::vector<SafetensorsTensorSpec>& specs) {
    const SafetensorsLayout layout = layout_safetensors(specs, {});
    std::ofstream file(dir_ / "model.safetensors", std::ios::binary | std::ios::trunc);
    file << layout.header;
    file << std::string(layout.file_bytes - layout.header.size(), '\0');
  }

  std::vector<SafetensorsTensorSpec> family_specs(Family family) {
    std::vector<SafetensorsTensorSpec> specs;
    for (const WeightSpec& spec : family_weight_specs(small_config(family)))
      specs.push_back({spec.name, DType::bf16, spec.shape});
    return specs;
  }

  json read_json(const std::string& name) {
    std::ifstream in(dir_ / name);
    return json::parse(in);
  }
  void write_json(const std::string& name, const json& value) {
    std::ofstream(dir_ / name) << value.dump(2);
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, LoadsSingleFileLlada) {
  write(Family::llada);
  const auto model = Model::load(dir_);
  EXPECT_EQ(model->config().family, Family::llada);
  EXPECT_EQ(model->weights().layers.size(), 2u);
  EXPECT_EQ(model->weights().layers[1].up.name, "model.transformer.blocks.1.up_proj.weight");
  EXPECT_FALSE(model->weights().layers[0].q_bias);
  EXPECT_EQ(model->weights().lm_head.name, "model.transformer.ff_out.weight");
  EXPECT_EQ(model->weights().embedding.dtype, DType::bf16);
  // Norm weights were drawn around 1 (see write_test_model).
  const auto* norm = static_cast<const uint16_t*>(model->weights().final_norm.data);
  EXPECT_NEAR(bf16_to_f32(norm[0]), 1.0f, 0.6f);
}

TEST_F(CheckpointTest, LoadsShardedDream) {
  write(Family::dream, 3, DType::f16);
  EXPECT_TRUE(fs::exists(dir_ / "model-00003-of-00003.safetensors"));
  const auto model = Model::load(dir_);
  EXPECT_EQ(model->config().family, Family::dream);
  EXPECT_TRUE(model->weights().layers[1].k_bias);
  EXPECT_EQ(model->weights().layers[1].k.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(model->weights().lm_head.name, "lm_head.weight");
  EXPECT_EQ(model->weights().embedding.dtype, DType::f16);
}

TEST_F(CheckpointTest, SameSeedSameBytesWhateverTheSharding) {
  write(Family::llada, 1);
  const auto single = Model::load(dir_);
  const fs::path other = dir_.string() + "_sharded";
  TestModelOptions options;
  options.shards = 4;
  options.seed = 5;
  write_test_model(small_config(Family::llada), options, other);
  const auto sharded = Model::load(other);
  const WeightView& a = single->weights().layers[1].down;
  const WeightView& b = sharded->weights().layers[1].down;
  EXPECT_EQ(std::memcmp(a.data, b.data, 64 * 96 * 2), 0);
  fs::remove_all(other);
}

TEST_F(CheckpointTest, TiedEmbeddingsNeedNoHead) {
  ModelConfig config = small_config(Family::llada);
  config.tied_embeddings = true;
  write_test_model(config, {}, dir_);
  const auto model = Model::load(dir_);
  EXPECT_EQ(model->weights().lm_head.data, model->weights().embedding.data);
}

// LLaDA-MoE (small_config: 8 experts of width 96, 2 per token): the experts bound per layer, and
// damaged folders named by the tensor or field.
TEST_F(CheckpointTest, LoadsLladaMoeExperts) {
  write(Family::llada_moe, 2);
  const auto model = Model::load(dir_);
  const ModelWeights& w = model->weights();
  ASSERT_EQ(w.layers[1].experts.size(), 8u);
  EXPECT_EQ(w.layers[1].experts[7].down.name, "model.layers.1.mlp.experts.7.down_proj.weight");
  EXPECT_EQ(w.layers[1].experts[7].down.shape, (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(expert_weight_of(w, 0, WeightRole::expert_up, 3).name, "model.layers.0.mlp.experts.3.up_proj.weight");
  EXPECT_EQ(w.layers[0].router.shape, (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(w.layers[0].q_norm.shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(w.layers[0].k_norm.name, "model.layers.0.self_attn.k_norm.weight");
}

TEST_F(CheckpointTest, DamagedLladaMoeFolders) {
  write(Family::llada_moe);
  auto specs = family_specs(Family::llada_moe);
  std::erase_if(specs, [](const SafetensorsTensorSpec& t) { return t.name == "model.layers.1.mlp.experts.3.up_proj.weight"; });
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("missing tensor 'model.layers.1.mlp.experts.3.up_proj.weight' "
                                      "(a llada-moe checkpoint with this config.json needs shape [96, 64])"));
  // A ninth expert the config does not have.
  specs = family_specs(Family::llada_moe);
  specs.push_back({"model.layers.0.mlp.experts.8.gate_proj.weight", DType::bf16, {96, 64}});
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("unexpected tensor 'model.layers.0.mlp.experts.8.gate_proj.weight'"));
  // A config with more experts than the folder holds: the router's shape names the disagreement.
  rewrite_single_file(family_specs(Family::llada_moe));
  json config = read_json("config.json");
  config["num_experts"] = 16;
  write_json("config.json", config);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'model.layers.0.mlp.gate.weight' has shape [8, 64] but config.json "
                                      "implies [16, 64]"));
}

// LLaDA 2.x (small_config: a dense layer 0, then 16 experts of width 64 and a shared expert): the
// fused QKV bound as q, k and v views of its rows, the expert bias kept in fp32, damaged folders
// named by the tensor.
TEST_F(CheckpointTest, LoadsLlada2FusedQkvAndExperts) {
  write(Family::llada2, 2);
  const auto model = Model::load(dir_);
  const ModelWeights& w = model->weights();
  const LayerWeights& l1 = w.layers[1];
  ASSERT_TRUE(l1.qkv);
  EXPECT_EQ(l1.qkv.shape, (std::vector<int64_t>{64 + 2 * 32, 64}));
  const auto* fused = static_cast<const std::byte*>(l1.qkv.data);
  EXPECT_EQ(l1.q.data, fused);
  EXPECT_EQ(l1.k.data, fused + 64 * 64 * 2);
  EXPECT_EQ(l1.v.data, fused + (64 + 32) * 64 * 2);
  EXPECT_EQ(l1.q.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l1.v.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_TRUE(w.layers[0].experts.empty());
  EXPECT_EQ(w.layers[0].gate.name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(w.layers[0].gate.shape, (std::vector<int64_t>{96, 64}));
  ASSERT_EQ(l1.experts.size(), 16u);
  EXPECT_EQ(l1.gate.name, "model.layers.1.mlp.shared_experts.gate_proj.weight");
  EXPECT_EQ(l1.gate.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l1.router_bias.dtype, DType::f32);
  EXPECT_EQ(l1.router_bias.shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(l1.q_norm.name, "model.layers.1.attention.query_layernorm.weight");
  EXPECT_EQ(w.embedding.name, "model.word_embeddings.weight");
}

TEST_F(CheckpointTest, DamagedLlada2Folders) {
  write(Family::llada2);
  auto specs = family_specs(Family::llada2);
  std::erase_if(specs, [](const SafetensorsTensorSpec& t) { return t.name == "model.layers.1.mlp.gate.expert_bias"; });
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("missing tensor 'model.layers.1.mlp.gate.expert_bias' "
                                      "(a llada2 checkpoint with this config.json needs shape [16])"));
  specs = family_specs(Family::llada2);
  for (SafetensorsTensorSpec& t : specs)
    if (t.name == "model.layers.0.attention.query_key_value.weight") t.shape = {64 + 2 * 64, 64};  // MHA-sized
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'model.layers.0.attention.query_key_value.weight' has shape [192, 64] "
                                      "but config.json implies [128, 64]"));
  // A dense layer 1 the config does not have.
  specs = family_specs(Family::llada2);
  specs.push_back({"model.layers.1.mlp.gate_proj.weight", DType::bf16, {96, 64}});
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("unexpected tensor 'model.layers.1.mlp.gate_proj.weight'"));
}

TEST_F(CheckpointTest, TruncatedFile) {
  write(Family::llada);
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 100);
  EXPECT_THAT(load_error(), HasSubstr("model.safetensors: tensor 'model.transformer.ff_out.weight': "
                                      "data ["));
  EXPECT_THAT(load_error(), HasSubstr("(truncated file?)"));
}

TEST_F(CheckpointTest, HeaderLengthBeyondFile) {
  write(Family::llada);
  fs::resize_file(dir_ / "model.safetensors", 100);
  EXPECT_THAT(load_error(), HasSubstr("model.safetensors: header length"));
}

TEST_F(CheckpointTest, MissingTensor) {
  write(Family::llada);
  auto specs = family_specs(Family::llada);
  specs.erase(specs.begin() + 3);  // blocks.0.k_proj.weight
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("missing tensor 'model.transformer.blocks.0.k_proj.weight' "
                                      "(a llada checkpoint with this config.json needs shape [32, 64])"));
}

TEST_F(CheckpointTest, UnexpectedTensor) {
  write(Family::dream);
  auto specs = family_specs(Family::dream);
  specs.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", DType::f32, {8}});
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(),
              HasSubstr("model.safetensors: unexpected tensor 'model.layers.0.self_attn.rotary_emb.inv_freq'"));
}

TEST_F(CheckpointTest, ShapeDisagreesWithConfig) {
  write(Family::llada);
  json config = read_json("config.json");
  config["mlp_hidden_size"] = 128;
  write_json("config.json", config);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'model.transformer.blocks.0.ff_proj.weight' has shape "
                                      "[96, 64] but config.json implies [128, 64]"));
}

TEST_F(CheckpointTest, NonFloatWeight) {
  write(Family::llada);
  auto specs = family_specs(Family::llada);
  specs[1].dtype = DType::i16;  // attn_norm
  rewrite_single_file(specs);
  EXPECT_THAT(load_error(), HasSubstr("has dtype I16; weights must be F32, F16 or BF16"));
}

TEST_F(CheckpointTest, MissingConfigField) {
  write(Family::dream);
  json config = read_json("config.json");
  config.erase("num_hidden_layers");
  write_json("config.json", config);
  EXPECT_THAT(load_error(), HasSubstr("config.json: missing field 'num_hidden_layers'"));
}

TEST_F(CheckpointTest, MissingConfigFile) {
  write(Family::dream);
  fs::remove(dir_ / "config.json");
  EXPECT_THAT(load_error(), HasSubstr("no config.json in this folder"));
}

TEST_F(CheckpointTest, NoWeights) {
  write(Family::llada);
  fs::remove(dir_ / "model.safetensors");
  EXPECT_THAT(load_error(), HasSubstr("no model.safetensors or model.safetensors.index.json"));
}

TEST_F(CheckpointTest, ShardNamedByIndexIsMissing) {
  write(Family::llada, 2);
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  EXPECT_THAT(load_error(), HasSubstr("shard 'model-00002-of-00002.safetensors' named by "
                                      "model.safetensors.index.json does not exist"));
}

TEST_F(CheckpointTest, IndexDisagreesWithShards) {
  write(Family::llada, 2);
  json index = read_json("model.safetensors.index.json");
  index["weight_map"]["model.transformer.wte.weight"] = "model-00002-of-00002.safetensors";
  write_json("model.safetensors.index.json", index);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'model.transformer.wte.weight' is listed in "
                                      "model.safetensors.index.json under shard 'model-00002-of-00002.safetensors'"));

  index["weight_map"].erase("model.transformer.wte.weight");
  write_json("model.safetensors.index.json", index);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'model.transformer.wte.weight' is not listed in"));

  index["weight_map"]["model.transformer.wte.weight"] = "model-00001-of-00002.safetensors";
  index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
  write_json("model.safetensors.index.json", index);
  EXPECT_THAT(load_error(), HasSubstr("tensor 'ghost' is listed in model.safetensors.index.json but "
                                      "shard 'model-00001-of-00002.safetensors' does not contain it"));

  index["weight_map"]["ghost"] = "../elsewhere.safetensors";
  write_json("model.safetensors.index.json", index);
  EXPECT_THAT(load_error(), HasSubstr("which is not a file in this folder"));
}

TEST_F(CheckpointTest, IndexNotJson) {
  write(Family::llada, 2);
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": ";
  EXPECT_THAT(load_error(), HasSubstr("model.safetensors.index.json: not valid JSON"));
}

}  // namespace
}  // namespace mosaic
