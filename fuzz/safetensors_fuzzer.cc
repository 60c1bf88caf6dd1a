// libFuzzer target: the safetensors header parser must turn any byte string into either a
// validated header or a mosaic::Error. Anything else (a crash, a sanitizer report, another
// exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const mosaic::SafetensorsHeader header = mosaic::parse_safetensors(file, "fuzz.safetensors");
    // Validated tensors must lie inside the input (touch their first and last bytes) and, in
    // data order, tile the data section from its first byte to the end of the file.
    uint64_t covered = header.data_offset;
    for (const mosaic::SafetensorsTensor& tensor : header.tensors) {
      if (tensor.offset != covered) __builtin_trap();
      covered += tensor.bytes;
      if (tensor.bytes == 0) continue;
      volatile std::byte first = file[tensor.offset];
      volatile std::byte last = file[tensor.offset + tensor.bytes - 1];
      (void)first;
      (void)last;
    }
    if (covered != size) __builtin_trap();
  } catch (const mosaic::Error&) {
  }
  return 0;
}
