// The launch configuration of a kernel that runs in clusters of two CTAs along x (the Hopper
// kernels' paired CTAs, which multicast shared tiles into each other): for cudaLaunchKernelEx and
// cudaOccupancyMaxActiveClusters. Host code.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mosaic::cuda {

struct PairLaunchConfig {
  cudaLaunchAttribute cluster{};
  cudaLaunchConfig_t config{};

  PairLaunchConfig(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream) {
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    config.gridDim = grid, config.blockDim = block, config.dynamicSmemBytes = shared_bytes;
    config.stream = stream, config.attrs = &cluster, config.numAttrs = 1;
  }
  // `config` points at `cluster`: not copyable.
  PairLaunchConfig(const PairLaunchConfig&) = delete;
  PairLaunchConfig& operator=(const PairLaunchConfig&) = delete;
};

}  // namespace mosaic::cuda
