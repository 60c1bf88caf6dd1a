// CudaStepGraphs on its own, with enqueued work small enough to read back: a signature launches
// directly the first time, is captured the second, replayed after; a capture CUDA invalidates
// falls back to direct launches; an exception that a direct launch raises too propagates.
// Skipped without a device.
#include "exec/cuda_step_graphs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "backend/cuda/cuda_check.h"
#include "mem/cuda_arena.h"

namespace mosaic {
namespace {

class CudaStepGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
    if (!CudaStepGraphs().enabled()) GTEST_SKIP() << "CUDA graphs are off (MOSAIC_CUDA_GRAPHS=0)";
    MOSAIC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MOSAIC_CUDA_CHECK(cudaMalloc(&word_, 4));
  }
  void TearDown() override {
    if (word_ != nullptr) cudaFree(word_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  // Sets every byte of the device word to `byte`, on the stream.
  void set(int byte) { MOSAIC_CUDA_CHECK(cudaMemsetAsync(word_, byte, 4, stream_)); }
  // A step that counts its calls and sets the word to `byte`.
  std::function<void()> counted_set(int& calls, int byte) {
    return [this, &calls, byte] {
      ++calls;
      set(byte);
    };
  }
  uint32_t word() {
    MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    uint32_t value = 0;
    MOSAIC_CUDA_CHECK(cudaMemcpy(&value, word_, 4, cudaMemcpyDeviceToHost));
    return value;
  }

  cudaStream_t stream_ = nullptr;
  void* word_ = nullptr;
};

TEST_F(CudaStepGraphsTest, CapturesTheSecondSightingAndReplaysTheThird) {
  CudaStepGraphs graphs;
  int calls = 0;
  auto enqueue = [&](int byte) { return counted_set(calls, byte); };
  graphs.run({1, 2}, stream_, enqueue(0x11));  // direct
  EXPECT_EQ(word(), 0x11111111u);
  graphs.run({1, 2}, stream_, enqueue(0x22));  // captured (the byte is a host value: baked in)
  EXPECT_EQ(word(), 0x22222222u);
  set(0);
  graphs.run({1, 2}, stream_, enqueue(0x33));  // replayed: the captured launches, not these
  EXPECT_EQ(word(), 0x22222222u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(graphs.replays(), 1u);
  graphs.run({1, 3}, stream_, enqueue(0x44));  // another signature: direct
  EXPECT_EQ(word(), 0x44444444u);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(graphs.enabled());
}

TEST_F(CudaStepGraphsTest, ShapesExpectedToRepeatAreCapturedAtOnceWhileCapturesPayOff) {
  CudaStepGraphs graphs;
  int calls = 0;
  auto enqueue = [&](int byte) { return counted_set(calls, byte); };
  graphs.run({7}, stream_, enqueue(0x11), /*expect_repeats=*/true);  // nothing replayed yet: direct
  graphs.run({7}, stream_, enqueue(0x22), true);                     // captured
  graphs.run({7}, stream_, enqueue(0x33), true);                     // replayed: captures pay off
  EXPECT_EQ(calls, 2);
  graphs.run({8}, stream_, enqueue(0x44), true);  // captured at its first sighting
  EXPECT_EQ(word(), 0x44444444u);
  set(0);
  graphs.run({8}, stream_, enqueue(0x55), true);  // replayed
  EXPECT_EQ(word(), 0x44444444u);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(graphs.replays(), 2u);
  graphs.run({9}, stream_, enqueue(0x66), true);   // captured at once, never replayed...
  graphs.run({10}, stream_, enqueue(0x77), true);  // ...so the next first sighting runs directly
  graphs.run({10}, stream_, enqueue(0x77), false); // and is captured at its second
  graphs.run({10}, stream_, enqueue(0x77), false); // replayed
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(graphs.replays(), 3u);
}

TEST_F(CudaStepGraphsTest, WithEverySlotTakenACaptureEvictsTheLeastRecentGraph) {
  CudaStepGraphs graphs(1);
  int calls = 0;
  auto enqueue = [&](int byte) { return counted_set(calls, byte); };
  graphs.run({1}, stream_, enqueue(0x11), true);
  graphs.run({1}, stream_, enqueue(0x22), true);  // captured: the one slot
  graphs.run({2}, stream_, enqueue(0x33), true);
  graphs.run({2}, stream_, enqueue(0x44), true);  // captured, evicting {1}'s graph
  EXPECT_EQ(word(), 0x44444444u);
  set(0);
  graphs.run({2}, stream_, enqueue(0x55));  // replays {2}'s graph
  EXPECT_EQ(word(), 0x44444444u);
  EXPECT_EQ(graphs.replays(), 1u);
  graphs.run({1}, stream_, enqueue(0x66));  // {1} is gone: direct
  EXPECT_EQ(word(), 0x66666666u);
  EXPECT_EQ(calls, 5);
}

TEST_F(CudaStepGraphsTest, ACaptureCudaRefusesFallsBackToDirectLaunches) {
  CudaStepGraphs graphs;
  // Synchronising a capturing stream is refused and invalidates the capture; directly it is fine.
  auto enqueue = [&] {
    set(0x5a);
    (void)cudaStreamSynchronize(stream_);
  };
  graphs.run({7}, stream_, enqueue);
  graphs.run({7}, stream_, enqueue);  // the capture fails; launched directly instead
  EXPECT_EQ(word(), 0x5a5a5a5au);
  EXPECT_FALSE(graphs.enabled());
  set(0);
  graphs.run({7}, stream_, enqueue);  // direct from now on
  EXPECT_EQ(word(), 0x5a5a5a5au);
  EXPECT_EQ(graphs.replays(), 0u);
}

TEST_F(CudaStepGraphsTest, AnErrorOfTheStepItselfPropagatesAndReplaysStayOn) {
  CudaStepGraphs graphs;
  auto failing = [] { throw std::invalid_argument("a wrong step"); };
  EXPECT_THROW(graphs.run({9}, stream_, failing), std::invalid_argument);
  EXPECT_THROW(graphs.run({9}, stream_, failing), std::invalid_argument);  // while capturing, then directly
  EXPECT_TRUE(graphs.enabled());
  auto fine = [&] { set(0x01); };
  graphs.run({10}, stream_, fine);
  graphs.run({10}, stream_, fine);
  graphs.run({10}, stream_, fine);
  EXPECT_EQ(graphs.replays(), 1u);
  EXPECT_EQ(word(), 0x01010101u);
}

}  // namespace
}  // namespace mosaic
