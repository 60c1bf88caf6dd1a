// The launch configuration of a kernel that runs in clusters of CTAs along x — of two for the
// Hopper kernels' paired CTAs, which multicast shared tiles into each other; of one per part (up
// to eight) for the split-keys attention — for cudaLaunchKernelEx and
// cudaOccupancyMaxActiveClusters. Host code.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mosaic::cuda {

struct ClusterLaunchConfig {
  cudaLaunchAttribute cluster{};
  cudaLaunchConfig_t config{};

  ClusterLaunchConfig(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, unsigned cluster_x) {
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = cluster_x, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    config.gridDim = grid, config.blockDim = block, config.dynamicSmemBytes = shared_bytes;
    config.stream = stream, config.attrs = &cluster, config.numAttrs = 1;
  }
  // `config` points at `cluster`: not copyable.
  ClusterLaunchConfig(const ClusterLaunchConfig&) = delete;
  ClusterLaunchConfig& operator=(const ClusterLaunchConfig&) = delete;
};

struct PairLaunchConfig : ClusterLaunchConfig {
  PairLaunchConfig(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream)
      : ClusterLaunchConfig(grid, block, shared_bytes, stream, 2) {}
};

}  // namespace mosaic::cuda
