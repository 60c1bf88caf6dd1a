// Tensor-parallel shards: the refusals of configurations that do not split, and that the ranks'
// pieces put back together are the model's tensors (rows for column-parallel weights, columns
// for row-parallel ones, the key/value heads a rank's query heads read).
#include "model/tensor_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "model/test_model.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ModelConfig small(Family family, int64_t kv_heads) {
  ModelConfig c = test_model_preset(family, "tiny");
  c.hidden = 32, c.layers = 2, c.heads = 4, c.kv_heads = kv_heads, c.head_dim = 8, c.ffn = 48;
  c.vocab = 64, c.mask_token_id = 60, c.eos_token_id = 61, c.pad_token_id = 61;
  return c;
}

std::string message_of(const ModelConfig& config, int64_t ranks) {
  try {
    check_tensor_parallel(config, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorParallel, RefusesWhatDoesNotSplitByName) {
  const ModelConfig c = small(Family::llada, 4);
  EXPECT_EQ(message_of(c, 1), "");
  EXPECT_EQ(message_of(c, 2), "");
  EXPECT_EQ(message_of(c, 4), "");
  EXPECT_THAT(message_of(c, 3), HasSubstr("4 attention heads do not divide into 3"));
  EXPECT_THAT(message_of(c, 0), HasSubstr("at least 1"));
  ModelConfig ffn = c;
  ffn.ffn = 50;
  EXPECT_THAT(message_of(ffn, 4), HasSubstr("50 FFN columns"));
  ModelConfig vocab = c;
  vocab.vocab = 66;
  EXPECT_THAT(message_of(vocab, 4), HasSubstr("66 vocabulary rows"));
  ModelConfig gqa = c;
  gqa.heads = 6, gqa.kv_heads = 2, gqa.hidden = 48;
  EXPECT_THAT(message_of(gqa, 3), HasSubstr("2 key/value heads cannot be shared evenly by 3"));
  EXPECT_THAT(message_of(test_model_preset(Family::llada_moe, "tiny"), 2), HasSubstr("--expert-parallel"));
  // The released architectures: LLaDA-8B splits over 8; Dream-7B's 28 heads over 2 and 4, not 8.
  EXPECT_EQ(message_of(test_model_preset(Family::llada, "llada-8b"), 8), "");
  EXPECT_EQ(message_of(test_model_preset(Family::dream, "dream-7b"), 4), "");
  EXPECT_THAT(message_of(test_model_preset(Family::dream, "dream-7b"), 8), HasSubstr("28 attention heads"));
}

TEST(TensorParallel, RankConfigHasItsShareOfHeadsColumnsAndVocabulary) {
  const ModelConfig rank = tensor_parallel_config(test_model_preset(Family::llada, "llada-8b"), 8);
  EXPECT_EQ(rank.heads, 4);
  EXPECT_EQ(rank.kv_heads, 4);
  EXPECT_EQ(rank.ffn, 1536);
  EXPECT_EQ(rank.vocab, 15808);
  EXPECT_EQ(rank.hidden, 4096);
  EXPECT_EQ(rank.head_dim, 128);
  const ModelConfig dream = tensor_parallel_config(test_model_preset(Family::dream, "dream-7b"), 4);
  EXPECT_EQ(dream.heads, 7);
  EXPECT_EQ(dream.kv_heads, 1);
}

class TensorParallelShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mosaic_tp_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<Model> load(const ModelConfig& config) {
    TestModelOptions options;
    options.dtype = DType::f32;
    options.seed = 5;
    write_test_model(config, options, dir_);
    return Model::load(dir_);
  }
  fs::path dir_;
};

float at(const WeightView& view, int64_t row, int64_t col) {
  const int64_t cols = view.shape.size() > 1 ? view.shape[1] : 1;
  float value;
  std::memcpy(&value, static_cast<const float*>(view.data) + row * cols + col, sizeof value);
  return value;
}

TEST_F(TensorParallelShardTest, PiecesPutBackTogetherAreTheModelsTensors) {
  // Dream: q/k/v biases; 2 key/value heads over 4 ranks, so pairs of ranks share one.
  const auto model = load(small(Family::dream, 2));
  const ModelConfig& c = model->config();
  const LayerWeights& whole = model->weights().layers[1];
  constexpr int64_t kRanks = 4;
  for (int64_t r = 0; r < kRanks; ++r) {
    const TensorParallelShard shard(*model, r, kRanks);
    const LayerWeights& part = shard.weights().layers[1];
    ASSERT_EQ(part.q.shape, (std::vector<int64_t>{8, 32}));
    ASSERT_EQ(part.k.shape, (std::vector<int64_t>{8, 32}));
    ASSERT_EQ(part.o.shape, (std::vector<int64_t>{32, 8}));
    ASSERT_EQ(part.gate.shape, (std::vector<int64_t>{12, 32}));
    ASSERT_EQ(part.down.shape, (std::vector<int64_t>{32, 12}));
    ASSERT_EQ(shard.weights().embedding.shape, (std::vector<int64_t>{16, 32}));
    EXPECT_EQ(shard.vocab_begin(), 16 * r);
    const int64_t kv_head = r / 2;  // query heads 2r, 2r + 1 read key/value head r / 2 of 2
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_EQ(at(part.q_bias, i, 0), at(whole.q_bias, 8 * r + i, 0));
      EXPECT_EQ(at(part.k_bias, i, 0), at(whole.k_bias, 8 * kv_head + i, 0));
      for (int64_t j = 0; j < 32; ++j) {
        EXPECT_EQ(at(part.q, i, j), at(whole.q, 8 * r + i, j));
        EXPECT_EQ(at(part.v, i, j), at(whole.v, 8 * kv_head + i, j));
        EXPECT_EQ(at(part.o, j, i), at(whole.o, j, 8 * r + i));
      }
    }
    for (int64_t j = 0; j < 32; ++j)
      for (int64_t f = 0; f < 12; ++f) {
        EXPECT_EQ(at(part.up, f, j), at(whole.up, 12 * r + f, j));
        EXPECT_EQ(at(part.down, j, f), at(whole.down, j, 12 * r + f));
      }
    EXPECT_EQ(at(shard.weights().lm_head, 3, 5), at(model->weights().lm_head, 16 * r + 3, 5));
    EXPECT_EQ(at(part.attn_norm, 7, 0), at(whole.attn_norm, 7, 0));
    EXPECT_LT(shard.weights().bytes, model->weights().bytes);
  }
  EXPECT_EQ(c.kv_heads, 2);
}

TEST_F(TensorParallelShardTest, RanksTogetherHoldTheModelsBytesWithNormsOnEach) {
  const auto model = load(small(Family::llada, 4));
  const ModelConfig& c = model->config();
  uint64_t total = 0;
  for (int64_t r = 0; r < 2; ++r) total += TensorParallelShard(*model, r, 2).weights().bytes;
  const uint64_t norms = static_cast<uint64_t>(c.layers * 2 + 1) * static_cast<uint64_t>(c.hidden) * sizeof(float);
  EXPECT_EQ(total, model->weights().bytes + norms);  // every norm held twice, everything else once
}

}  // namespace
}  // namespace mosaic
