// Hopper (sm_90a) building blocks in PTX, shared by the kernels that use the Tensor Memory
// Accelerator and warpgroup MMAs: shared-memory matrix descriptors, wgmma issue / commit / wait,
// mbarriers and named barriers, TMA loads (multicast included), cluster helpers and the
// register hand-off between warpgroups (setmaxnreg). Device code only, and only in the sm_90a
// pass (elsewhere the header declares nothing). Include only from .cu files compiled for sm_90a.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/ptx.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace mosaic::cuda::sm90 {

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (all in 16-byte units), layout type 1 in bits 62-63.
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address, uint32_t leading_bytes,
                                                    uint32_t stride_bytes) {
  return static_cast<uint64_t>((address & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
         (static_cast<uint64_t>(stride_bytes >> 4) << 32) | (uint64_t{1} << 62);
}

// The same without swizzle (layout type 0): core matrices of 8 rows x 16 contiguous bytes, the
// leading and stride byte offsets between core matrices along K and along M / N.
__device__ __forceinline__ uint64_t smem_descriptor_unswizzled(uint32_t address, uint32_t leading_bytes,
                                                               uint32_t stride_bytes) {
  return static_cast<uint64_t>((address & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
         (static_cast<uint64_t>(stride_bytes >> 4) << 32);
}

// Keeps the compiler from moving register reads or writes across the asynchronous MMA.
template <int kCount>
__device__ __forceinline__ void fence_registers(float (&r)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Writes by ordinary stores (cp.async included) become visible to wgmma's operand reads.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The accumulator operands of an m64n128 wgmma: the 64 registers in the instruction's text
// (inline-asm operands %0..%63) and as read-write outputs.
#define MOSAIC_WGMMA_OPERANDS_0_63                                                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "   \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define MOSAIC_WGMMA_D64 "{" MOSAIC_WGMMA_OPERANDS_0_63 "}"
#define MOSAIC_WGMMA_ACCUMULATORS(d)                                                                   \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),     \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),      \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),      \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),      \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// D [64 x 128] (+)= A [64 x 16] B [16 x 128]; A and B in shared memory, both K-major.
[[maybe_unused]] __device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b,
                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      MOSAIC_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : MOSAIC_WGMMA_ACCUMULATORS(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

// The accumulator operands of an m64n256 wgmma: %0..%127, the registers d[0..127].
#define MOSAIC_WGMMA_D128                                                                         \
  "{" MOSAIC_WGMMA_OPERANDS_0_63 ", "                                                             \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "   \
  "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "   \
  "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, "         \
  "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define MOSAIC_WGMMA_ACCUMULATORS128(d) MOSAIC_WGMMA_ACCUMULATORS(d), MOSAIC_WGMMA_ACCUMULATORS((d + 64))

// D [64 x 256] (+)= A [64 x 16] B [16 x 256]; A and B in shared memory, both K-major (128-byte
// swizzle). 128 fp32 accumulators per thread.
[[maybe_unused]] __device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], uint64_t a, uint64_t b,
                                                                     int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      MOSAIC_WGMMA_D128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
      : MOSAIC_WGMMA_ACCUMULATORS128(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

// D [64 x N] (+)= A [64 x 16] B [16 x N] for N = 16, 32, 64: A and B in shared memory, both K-major
// (128-byte swizzle); N / 2 fp32 accumulators per thread. The narrow column strips of the
// small-rows product (small_rows_gemm_sm90.cu).
[[maybe_unused]] __device__ __forceinline__ void wgmma_m64n16k16_ss(float (&d)[8], uint64_t a, uint64_t b,
                                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(accumulate));
}
[[maybe_unused]] __device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], uint64_t a, uint64_t b,
                                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(accumulate));
}
[[maybe_unused]] __device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b,
                                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
}

// D [64 x 128] (+)= A [64 x 16] B [16 x 128]; A in registers (the m16n8k16 A fragment per warp), B in
// shared memory, K-major.
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      MOSAIC_WGMMA_D64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : MOSAIC_WGMMA_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// D [64 x 128] += A [64 x 16] B [16 x 128]; A in registers (the m16n8k16 A fragment per warp), B in
// shared memory with N (not K) contiguous: transposed.
__device__ __forceinline__ void wgmma_m64n128k16_rs_transposed_b(float (&d)[64], const uint32_t (&a)[4],
                                                                 uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      MOSAIC_WGMMA_D64 ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : MOSAIC_WGMMA_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// D [64 x 8] += A [64 x 16] B [16 x 8]; A in registers (the m16n8k16 A fragment per warp), B in
// shared memory, K-major.
__device__ __forceinline__ void wgmma_m64n8k16_rs(float (&d)[4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, 1, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// mbarriers (shared memory, 8 bytes) and named barriers.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the phase with this parity (completion number & 1) has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// TMA: arrive on an mbarrier and add `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// TMA: copies the box at (column, row) of `map` into shared memory at `destination`, swizzled as
// the map says, and counts its bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t destination, const CUtensorMap* map, int column, int row,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(bar)
      : "memory");
}
// Clusters of CTAs that share tiles (paired kernels): this CTA's rank in its cluster; a barrier
// over every thread of the cluster that has not exited (release / acquire); the fence that makes
// mbarrier initialisation visible to the other CTAs.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ uint32_t cluster_size() {
  uint32_t size;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(size));
  return size;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arrives on the mbarrier at shared-memory offset `bar` of CTA `rank` of this cluster, with the
// default (release, CTA-scope) semantics: enough to say that this warpgroup's MMAs have finished
// reading a stage (release at cluster scope put a fence in the attention kernel's key loop).
__device__ __forceinline__ void mbarrier_arrive_in_cta(uint32_t bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}
// Distributed shared memory: the address of offset `address` of this CTA's shared memory in CTA
// `rank` of the cluster, and a 4-byte load from such an address.
__device__ __forceinline__ uint32_t cluster_shared_address(uint32_t address, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}
__device__ __forceinline__ float ld_cluster_shared_f32(uint32_t remote) {
  float value;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(value) : "r"(remote) : "memory");
  return value;
}
// TMA multicast: the box lands at `destination` in every CTA of `cta_mask`, each counting its
// bytes on its own mbarrier at offset `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t destination, const CUtensorMap* map, int column,
                                                      int row, uint32_t bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(bar), "h"(cta_mask)
      : "memory");
}
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

}  // namespace mosaic::cuda::sm90
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
