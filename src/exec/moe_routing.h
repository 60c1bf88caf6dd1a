// A model's LLaDA 2.x routing rule as the CPU kernel takes it (backend/cpu/moe_route_grouped.h).
#pragma once

#include "backend/cpu/moe_route_grouped.h"
#include "model/config.h"

namespace mosaic {

inline cpu::GroupedRouting grouped_routing(const ModelConfig& c) {
  return {.experts = c.experts, .k = c.experts_per_token, .groups = c.router_groups,
          .top_groups = c.router_top_groups, .scaling = static_cast<float>(c.routed_scaling)};
}

}  // namespace mosaic
