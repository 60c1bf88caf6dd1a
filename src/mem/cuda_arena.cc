#include "mem/cuda_arena.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/format_bytes.h"

namespace mosaic {
namespace {

[[noreturn]] void driver_failed(const char* call, CUresult result) {
  std::fprintf(stderr, "mosaic: CUDA driver error in %s: %d\n", call, static_cast<int>(result));
  std::abort();
}

void runtime_check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "mosaic: CUDA error in %s: %s\n", call, cudaGetErrorString(status));
    std::abort();
  }
}

// The driver entry points the VMM arena uses, looked up once through the runtime.
struct DriverApi {
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuDeviceGetAttribute) device_attribute = nullptr;

  bool load() {
    auto get = [](const char* name, auto& fn) {
      cudaDriverEntryPointQueryResult found{};
      void* pointer = nullptr;
      if (cudaGetDriverEntryPointByVersion(name, &pointer, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess || pointer == nullptr)
        return false;
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(pointer);
      return true;
    };
    return get("cuMemAddressReserve", address_reserve) && get("cuMemAddressFree", address_free) &&
           get("cuMemCreate", create) && get("cuMemRelease", release) && get("cuMemMap", map) &&
           get("cuMemUnmap", unmap) && get("cuMemSetAccess", set_access) &&
           get("cuMemGetAllocationGranularity", granularity) &&
           get("cuDeviceGetAttribute", device_attribute);
  }
};

class VmmArena final : public CudaArena {
 public:
  VmmArena(const DriverApi& api, int device, uint64_t reserve, uint64_t granularity)
      : api_(api), device_(device), granularity_(granularity) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    reserved_ = (reserve + granularity - 1) / granularity * granularity;
    const CUresult r = api_.address_reserve(&base_, reserved_, granularity, 0, 0);
    if (r != CUDA_SUCCESS) driver_failed("cuMemAddressReserve", r);
  }

  ~VmmArena() override {
    cudaDeviceSynchronize();  // no kernel may still use a page we unmap
    release_above(0);
    api_.address_free(base_, reserved_);
  }

  bool ensure(uint64_t bytes) override {
    const uint64_t wanted = (bytes + granularity_ - 1) / granularity_ * granularity_;
    if (wanted > reserved_)
      fail("a step needs {} of activations, more than the {} of addresses reserved", format_bytes(bytes),
           format_bytes(reserved_));
    const size_t first_new = pages_.size();
    while (mapped() < wanted) {
      CUmemGenericAllocationHandle handle{};
      CUresult r = api_.create(&handle, granularity_, &prop_, 0);
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        release_from(first_new);  // roll back this call's pages
        return false;
      }
      if (r != CUDA_SUCCESS) driver_failed("cuMemCreate", r);
      const CUdeviceptr at = base_ + mapped();
      r = api_.map(at, granularity_, 0, handle, 0);
      if (r != CUDA_SUCCESS) driver_failed("cuMemMap", r);
      CUmemAccessDesc access{};
      access.location = prop_.location;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      r = api_.set_access(at, granularity_, &access, 1);
      if (r != CUDA_SUCCESS) driver_failed("cuMemSetAccess", r);
      pages_.push_back(handle);
    }
    high_water_ = std::max(high_water_, mapped());
    return true;
  }

  void shrink(uint64_t bytes) override {
    const uint64_t keep = (bytes + granularity_ - 1) / granularity_;
    if (keep >= pages_.size()) return;
    runtime_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    release_from(static_cast<size_t>(keep));
  }

  void* base() const override { return reinterpret_cast<void*>(base_); }
  uint64_t mapped() const override { return pages_.size() * granularity_; }
  uint64_t granularity() const override { return granularity_; }
  bool uses_vmm() const override { return true; }

 private:
  void release_from(size_t first) {
    while (pages_.size() > first) {
      const CUdeviceptr at = base_ + (pages_.size() - 1) * granularity_;
      api_.unmap(at, granularity_);
      api_.release(pages_.back());
      pages_.pop_back();
    }
  }
  void release_above(size_t first) { release_from(first); }

  DriverApi api_;
  int device_;
  uint64_t granularity_;
  uint64_t reserved_ = 0;
  CUdeviceptr base_ = 0;
  CUmemAllocationProp prop_{};
  std::vector<CUmemGenericAllocationHandle> pages_;
};

class PlainArena final : public CudaArena {
 public:
  ~PlainArena() override {
    if (base_ != nullptr) {
      cudaDeviceSynchronize();
      cudaFree(base_);
    }
  }

  bool ensure(uint64_t bytes) override {
    const uint64_t wanted = (bytes + kGranule - 1) / kGranule * kGranule;
    if (wanted <= size_) return true;
    void* fresh = nullptr;
    const cudaError_t status = cudaMalloc(&fresh, wanted);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state
      return false;
    }
    runtime_check(status, "cudaMalloc");
    if (base_ != nullptr) {
      runtime_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      runtime_check(cudaFree(base_), "cudaFree");
    }
    base_ = fresh;
    size_ = wanted;
    high_water_ = std::max(high_water_, size_);
    return true;
  }

  void shrink(uint64_t bytes) override {
    if (base_ == nullptr || bytes >= size_) return;
    runtime_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    runtime_check(cudaFree(base_), "cudaFree");
    base_ = nullptr;
    size_ = 0;
    if (bytes > 0 && !ensure(bytes)) fail("cannot re-allocate {} after shrinking", format_bytes(bytes));
  }

  void* base() const override { return base_; }
  uint64_t mapped() const override { return size_; }
  uint64_t granularity() const override { return kGranule; }
  bool uses_vmm() const override { return false; }

 private:
  static constexpr uint64_t kGranule = uint64_t{2} << 20;
  void* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace

bool cuda_devices_visible() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();  // a missing driver leaves an error behind; clear it
  return ok;
}

uint64_t cuda_free_memory_bytes(int device) {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    fail("CUDA device {} is not available", device);
  }
  return free_bytes;
}

bool CudaArena::prepare_step(uint64_t bytes) {
  if (mapped() > 2 * std::max<uint64_t>(bytes, granularity())) shrink(bytes);
  return ensure(bytes);
}

std::unique_ptr<CudaArena> make_cuda_arena(int device, uint64_t reserve_bytes, bool force_plain) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device >= count) {
    cudaGetLastError();
    fail("CUDA device {} is not available ({} devices)", device, count);
  }
  runtime_check(cudaSetDevice(device), "cudaSetDevice");
  if (!force_plain) {
    DriverApi api;
    if (api.load()) {
      int supported = 0;
      const CUresult r = api.device_attribute(
          &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device);
      if (r == CUDA_SUCCESS && supported) {
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = device;
        size_t granularity = 0;
        if (api.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && granularity > 0) {
          uint64_t reserve = reserve_bytes;
          if (reserve == 0) {
            size_t free_bytes = 0, total_bytes = 0;
            runtime_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
            reserve = total_bytes;
          }
          return std::make_unique<VmmArena>(api, device, reserve, granularity);
        }
      }
    }
  }
  return std::make_unique<PlainArena>();
}

}  // namespace mosaic
