// The memory plan as JSON: the document `mosaic plan --json` prints and Python's
// `mosaic.plan()` / `Engine.plan()` return, written in one place so the two never drift.
//
//   const mosaic::PlanReport report = mosaic::plan_step(request);
//   std::string json = mosaic::plan_report_json(report);   // {"model": ..., "activation_peak_bytes": ...}
#pragma once

#include <string>

#include "mosaic/plan.h"

namespace mosaic {

// One plan: sizes in bytes, chunk counts, what is live at the peak. With `with_timeline`, also
// "categories", "op_names" and "timeline" ([op][category] live bytes) for plotting.
std::string plan_report_json(const PlanReport& report, bool with_timeline = false, int indent = 2);

// An L_max search: the budget, temperature, L_max and (when L_max > 0) the plan at L_max.
// `request` is the request find_lmax was given.
std::string lmax_report_json(const LmaxReport& report, const PlanRequest& request,
                             bool with_timeline = false, int indent = 2);

}  // namespace mosaic
