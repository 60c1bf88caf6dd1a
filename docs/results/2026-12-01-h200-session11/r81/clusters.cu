// How many clusters of 1, 2, 4 and 8 CTAs of the attention kernel's shape (384 threads, 225 KiB of
// shared memory, one CTA per SM) the device runs at once (experiment r81).
#include <cuda_runtime.h>
#include <cstdio>
__global__ void shaped_kernel(int* out) {
  extern __shared__ int smem[];
  if (threadIdx.x == 0 && out) out[blockIdx.x] = smem[0];
}
int main() {
  const int smem = 1024 + 32768 + 6 * 32768 + 128 + 256;
  cudaFuncSetAttribute(shaped_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(shaped_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("%s: %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int size : {1, 2, 4, 8, 16}) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(size * 64, 1, 1);
    config.blockDim = dim3(384, 1, 1);
    config.dynamicSmemBytes = smem;
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = size, attribute.val.clusterDim.y = 1, attribute.val.clusterDim.z = 1;
    config.attrs = &attribute, config.numAttrs = 1;
    int clusters = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, shaped_kernel, &config);
    printf("cluster size %2d: %3d clusters = %3d SMs (%s)\n", size, clusters, clusters * size, cudaGetErrorString(e));
  }
}
