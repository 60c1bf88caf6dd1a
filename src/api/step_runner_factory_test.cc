// EngineOptions::streamed_layers as the backend choice checks it: a count the model does not
// have, or streaming on the CPU backend (which holds every weight in host memory already), is
// refused by name before any step. The CUDA runner's streamed steps are checked on the GPU
// (tests/gpu/cuda_step_test.cc: StreamedLayerWeightsGiveTheResidentBits; auto:
// tests/gpu/auto_streaming_test.cc).
#include "api/step_runner_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "testing/tiny_model_folder.h"

namespace mosaic {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string error_of(const Model& model, const EngineOptions& options) {
  try {
    make_step_runner(model, options);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(StepRunnerFactory, StreamedLayersOutsideTheModelOrOnTheCpuAreRefusedByName) {
  const fs::path dir = testing_support::write_tiny_llada("mosaic_step_runner_factory_test", 3);
  const auto model = Model::load(dir);
  const int64_t layers = model->config().layers;
  EXPECT_THAT(error_of(*model, {.device = "cpu", .streamed_layers = layers + 1}),
              HasSubstr(fmt::format("streamed layers {}: the model has {} decoder layers (expected 0 to {})",
                                    layers + 1, layers, layers)));
  EXPECT_THAT(error_of(*model, {.device = "cpu", .streamed_layers = -2}), HasSubstr("streamed layers -2"));
  EXPECT_THAT(error_of(*model, {.device = "cpu", .streamed_layers = 1}),
              HasSubstr("streamed layers 1: the CPU backend holds every weight in host memory already"));
  const BackendChoice resident = make_step_runner(*model, {.device = "cpu"});
  EXPECT_EQ(resident.weight_bytes, model->weights().bytes);
  EXPECT_EQ(resident.streamed_weight_bytes, 0u);
  EXPECT_EQ(resident.streamed_layers, 0);  // auto, the default: the CPU streams nothing
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mosaic
