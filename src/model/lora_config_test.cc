// adapter_config.json: PEFT's fields read as PEFT reads them, and every unsupported option
// refused by name.
#include "model/lora_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

json d2f_config() {  // the fields of SJTU-DENG-Lab/D2F_LLaDA_Instruct_8B_Lora
  return json::parse(R"({"peft_type": "LORA", "r": 32, "lora_alpha": 32, "lora_dropout": 0.1, "bias": "none",
    "lora_bias": false, "target_modules": ["attn_out", "q_proj", "k_proj", "v_proj"], "fan_in_fan_out": false,
    "init_lora_weights": true, "task_type": null, "alpha_pattern": {}, "rank_pattern": {},
    "layers_to_transform": null, "layers_pattern": null, "modules_to_save": null, "exclude_modules": null,
    "layer_replication": null, "use_dora": false, "use_rslora": false})");
}

std::string error_of(const json& config) {
  try {
    parse_lora_config(config, "adapter_config.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(LoraConfig, ReadsTheD2fAdapter) {
  const LoraConfig config = parse_lora_config(d2f_config(), "adapter_config.json");
  EXPECT_EQ(config.rank, 32);
  EXPECT_EQ(config.alpha, 32);
  EXPECT_EQ(config.scaling, 1.0);
  EXPECT_TRUE(config.targets("model.transformer.blocks.3.attn_out"));
  EXPECT_TRUE(config.targets("q_proj"));
  EXPECT_FALSE(config.targets("model.transformer.blocks.3.ff_out"));
  EXPECT_FALSE(config.targets("model.transformer.blocks.3.xq_proj"));  // a suffix, not a module name
}

TEST(LoraConfig, ScalingIsAlphaOverRankOrOverItsRootWithRslora) {
  json config = d2f_config();
  config["r"] = 16, config["lora_alpha"] = 8;
  EXPECT_EQ(parse_lora_config(config, "c").scaling, 0.5);
  config["use_rslora"] = true;
  EXPECT_EQ(parse_lora_config(config, "c").scaling, 2.0);
}

TEST(LoraConfig, TargetModulesAsAStringIsAWholeMatchRegex) {
  json config = d2f_config();
  config["target_modules"] = R"(.*blocks\.[01]\.(q_proj|ff_out))";
  const LoraConfig parsed = parse_lora_config(config, "c");
  EXPECT_TRUE(parsed.targets("model.transformer.blocks.1.ff_out"));
  EXPECT_FALSE(parsed.targets("model.transformer.blocks.2.q_proj"));
  EXPECT_FALSE(parsed.targets("model.transformer.blocks.1.q_proj.x"));
  config["target_modules"] = "(unclosed";
  EXPECT_THAT(error_of(config), HasSubstr("'target_modules' \"(unclosed\" is not a valid regular expression"));
}

TEST(LoraConfig, RefusesWhatItDoesNotReproduce) {
  const std::vector<std::pair<std::pair<const char*, json>, const char*>> cases = {
      {{"r", 0}, "'r' must be a positive integer (the LoRA rank), got 0"},
      {{"r", 2.5}, "'r' must be a positive integer"},
      {{"r", nullptr}, "missing 'r'"},
      {{"lora_alpha", "8"}, "'lora_alpha' must be a number"},
      {{"lora_alpha", 1e300}, "not a finite fp32 number"},
      {{"use_dora", true}, "'use_dora' is true; DoRA adapters are not supported"},
      {{"bias", "all"}, "'bias' is \"all\"; only \"none\" is supported"},
      {{"lora_bias", true}, "'lora_bias' is true"},
      {{"peft_type", "IA3"}, "'peft_type' is \"IA3\""},
      {{"rank_pattern", {{"q_proj", 8}}}, "'rank_pattern' is {\"q_proj\":8}; per-module ranks"},
      {{"layers_to_transform", {0, 1}}, "'layers_to_transform' is [0,1]"},
      {{"modules_to_save", {"lm_head"}}, "'modules_to_save' is [\"lm_head\"]"},
      {{"target_modules", json::array()}, "'target_modules' must be a non-empty list"},
      {{"target_modules", {"q_proj", 3}}, "'target_modules' entries must be module names, got 3"},
      {{"target_modules", nullptr}, "missing 'target_modules'"},
  };
  for (const auto& [change, message] : cases) {
    json config = d2f_config();
    config[change.first] = change.second;
    EXPECT_THAT(error_of(config), HasSubstr(message)) << change.first;
  }
  EXPECT_THAT(error_of(json::array()), HasSubstr("expected a JSON object"));
}

TEST(LoraConfig, FanInFanOutIsReadAsFalseLikePeftDoesForLinearLayers) {
  json config = d2f_config();
  config["fan_in_fan_out"] = true;
  EXPECT_EQ(parse_lora_config(config, "c").rank, 32);
}

}  // namespace
}  // namespace mosaic
