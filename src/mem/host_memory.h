// How much memory this machine gives the process: physical RAM, or less where a cgroup (a
// container's memory limit) says so. The CPU backend's budget when the user sets none.
#pragma once

#include <cstdint>
#include <filesystem>

namespace mosaic {

// min(physical RAM, the cgroup v2 limit at `cgroup_limit_file` when it holds a number).
uint64_t host_memory_bytes(const std::filesystem::path& cgroup_limit_file = "/sys/fs/cgroup/memory.max");

}  // namespace mosaic
