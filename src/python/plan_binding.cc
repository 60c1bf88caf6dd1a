// plan_json / find_lmax_json: mosaic::plan_step and mosaic::find_lmax from a configuration alone,
// answered as the JSON document `mosaic plan --json` prints (include/mosaic/plan_json.h); the
// package turns it into a dict.
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "mosaic/plan_json.h"
#include "python/bindings.h"

namespace mosaic::python {
namespace {

PlanRequest make_request(std::string model, std::string device, std::string activations,
                         std::string head, std::optional<uint64_t> budget, double temperature,
                         std::string planner, std::string adapter, std::string weights, std::string residual,
                         int64_t tensor_parallel, int64_t context_parallel) {
  PlanRequest request;
  request.tensor_parallel = tensor_parallel;
  request.context_parallel = context_parallel;
  request.weights = std::move(weights);
  request.residual = std::move(residual);
  request.model = std::move(model);
  request.device = std::move(device);
  request.activations = std::move(activations);
  request.head = std::move(head);
  request.budget = budget;
  request.temperature = temperature;
  request.planner = std::move(planner);
  request.adapter = std::move(adapter);
  return request;
}

std::string plan_json(std::string model, std::vector<int64_t> lengths, std::vector<int64_t> candidates,
                      std::string device, std::string activations, std::string head,
                      std::array<int64_t, 4> chunks, std::optional<uint64_t> budget,
                      double temperature, std::string planner, bool timeline, std::string adapter,
                      std::string weights, std::string residual, int64_t tensor_parallel,
                      int64_t context_parallel) {
  PlanRequest request = make_request(std::move(model), std::move(device), std::move(activations),
                                     std::move(head), budget, temperature, std::move(planner), std::move(adapter),
                                     std::move(weights), std::move(residual), tensor_parallel, context_parallel);
  request.lengths = std::move(lengths);
  request.candidates = std::move(candidates);
  request.qkv_chunks = chunks[0], request.attention_chunks = chunks[1];
  request.ffn_chunks = chunks[2], request.head_chunks = chunks[3];
  py::gil_scoped_release release;
  return plan_report_json(plan_step(request), timeline);
}

std::string find_lmax_json(std::string model, std::string device, std::string activations,
                           std::string head, uint64_t budget, double temperature, std::string planner,
                           bool timeline, std::string adapter, std::string weights, std::string residual,
                           int64_t tensor_parallel, int64_t context_parallel) {
  const PlanRequest request = make_request(std::move(model), std::move(device), std::move(activations),
                                           std::move(head), budget, temperature, std::move(planner),
                                           std::move(adapter), std::move(weights), std::move(residual),
                                           tensor_parallel, context_parallel);
  py::gil_scoped_release release;
  return lmax_report_json(find_lmax(request), request, timeline);
}

}  // namespace

void bind_plan(py::module_& m) {
  m.def("plan_json", &plan_json, py::kw_only(), py::arg("model"), py::arg("lengths"),
        py::arg("candidates"), py::arg("device"), py::arg("activations"), py::arg("head"),
        py::arg("chunks"), py::arg("budget"), py::arg("temperature"), py::arg("planner"),
        py::arg("timeline"), py::arg("adapter") = "", py::arg("weights") = "device", py::arg("residual") = "auto",
        py::arg("tensor_parallel") = 1, py::arg("context_parallel") = 1);
  m.def("find_lmax_json", &find_lmax_json, py::kw_only(), py::arg("model"), py::arg("device"),
        py::arg("activations"), py::arg("head"), py::arg("budget"), py::arg("temperature"),
        py::arg("planner"), py::arg("timeline"), py::arg("adapter") = "", py::arg("weights") = "device",
        py::arg("residual") = "auto", py::arg("tensor_parallel") = 1, py::arg("context_parallel") = 1);
}

}  // namespace mosaic::python
