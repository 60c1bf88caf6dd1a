// Each sequence's canvas kept on the device between steps (docs/design/device-commit.md): the
// step's token ids are copied from it on the device and the device commit writes its tokens into
// it, so a canvas crosses from the host only when it is new or the host changed it (an EOS fill,
// a commit made on the host). A host copy of what the device holds, kept current with the
// device's commits, tells which: the caller's canvas is compared with it before every step.
//
//   DeviceCanvases canvases(stream);
//   int32_t* canvas = canvases.hold(id, host_canvas);      // uploads if new or different
//   ... step on `stream`: ids from `canvas`, commit into `canvas` ...
//   canvases.record_commit(id, candidate_positions, committed_rows);
//   canvases.release(id);                                  // the request left
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/commit_rule.h"

namespace mosaic {

class DeviceCanvases {
 public:
  // Uploads are ordered on `stream`, the stream of the steps that read and write the canvases.
  explicit DeviceCanvases(cudaStream_t stream) : stream_(stream) {}
  ~DeviceCanvases();  // frees every canvas; never throws
  DeviceCanvases(const DeviceCanvases&) = delete;
  DeviceCanvases& operator=(const DeviceCanvases&) = delete;

  // The device canvas `id`, holding `ids` once the stream reaches the step: uploaded when the
  // canvas is new or `ids` differ from what the device holds.
  int32_t* hold(uint64_t id, std::span<const int32_t> ids);
  // The device commit wrote rows[i].token at positions[i] for every committed row i: the host copy
  // follows.
  void record_commit(uint64_t id, std::span<const int32_t> positions, std::span<const CommittedRow> rows);
  // Frees the canvas (nothing when `id` is not held).
  void release(uint64_t id);

  // What the device holds for `id` (empty when not held); waits for the stream.
  std::vector<int32_t> download(uint64_t id) const;
  int64_t uploads() const { return uploads_; }
  int64_t held() const { return static_cast<int64_t>(canvases_.size()); }

 private:
  struct Canvas {
    int32_t* device = nullptr;   // int32 [host.size()]
    std::vector<int32_t> host;   // what the device holds (once the stream reaches it)
  };
  cudaStream_t stream_;
  std::map<uint64_t, Canvas> canvases_;
  int64_t uploads_ = 0;
};

}  // namespace mosaic
