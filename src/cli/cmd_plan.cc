// mosaic plan: the memory plan of one denoising step, from a configuration alone.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/list_parse.h"
#include "cli/parallel_flags.h"
#include "core/error.h"
#include "mosaic/device.h"
#include "mosaic/plan.h"
#include "mosaic/plan_json.h"

namespace mosaic::cli {
namespace {

struct PlanOptions {
  PlanRequest request;
  int64_t seq_len = 0, prompt_len = -1, masked = -1, cached_rows = 0;
  std::string batch, chunks, svg, budget;
  bool json = false, find_lmax = false;
};

std::string gib(uint64_t bytes) { return fmt::format("{:.3f} GiB", bytes / 1073741824.0); }

// Candidates of a sequence of length L: --masked M, else L - prompt (prompt defaults to L / 2).
int64_t candidates_for(const PlanOptions& o, int64_t length) {
  if (o.masked >= 0) {
    if (o.masked > length) fail("--masked {} exceeds the sequence length {}", o.masked, length);
    return o.masked;
  }
  const int64_t prompt = o.prompt_len >= 0 ? o.prompt_len : length / 2;
  if (prompt > length) fail("--prompt-len {} exceeds the sequence length {}", prompt, length);
  return length - prompt;
}

void build_shape(PlanOptions& o) {
  if (!o.budget.empty()) o.request.budget = parse_byte_size(o.budget, "--budget");
  if (o.find_lmax) {
    if (!o.request.budget) {
      // Planning for the GPU this machine has: its memory is the natural budget.
      const std::optional<GpuInfo> gpu = o.request.device == "cuda" ? visible_gpu() : std::nullopt;
      if (!gpu) fail("--find-lmax needs --budget (no GPU is visible to take its memory as the budget)");
      o.request.budget = gpu->total_bytes;
      if (!o.json) fmt::print("budget: all memory of the visible {} ({:.1f} GiB)\n", gpu->name, gpu->total_bytes / 1073741824.0);
    }
    if (o.seq_len != 0 || !o.batch.empty() || !o.chunks.empty())
      fail("--find-lmax chooses the length and the chunks itself: drop --seq-len, --batch and --chunks");
    return;
  }
  if (o.request.budget && !o.chunks.empty())
    fail("--budget chooses the chunks itself: drop --chunks");
  std::vector<int64_t> lengths;
  if (!o.batch.empty()) {
    if (o.seq_len != 0) fail("give either --seq-len or --batch, not both");
    for (int32_t length : parse_int_list(o.batch, "--batch")) lengths.push_back(length);
  } else {
    lengths.push_back(o.seq_len);
  }
  for (int64_t length : lengths) {
    if (length <= 0) fail("sequence length must be positive, got {} (--seq-len or --batch)", length);
    o.request.lengths.push_back(length);
    o.request.candidates.push_back(o.cached_rows > 0 && o.masked < 0 ? std::min(o.cached_rows, length)
                                                                     : candidates_for(o, length));
    if (o.cached_rows > 0) o.request.cached_rows.push_back(o.cached_rows);
  }
  if (!o.chunks.empty()) {
    const std::vector<int32_t> counts = parse_int_list(o.chunks, "--chunks");
    if (counts.size() != 4) fail("--chunks takes four counts: qkv,attention,ffn,head");
    o.request.qkv_chunks = counts[0], o.request.attention_chunks = counts[1];
    o.request.ffn_chunks = counts[2], o.request.head_chunks = counts[3];
  }
}

void print_report(const PlanOptions& o, const PlanReport& r);

int run_find_lmax(PlanOptions& o) {
  const LmaxReport lmax = find_lmax(o.request);
  if (o.json) {
    std::puts(lmax_report_json(lmax, o.request).c_str());
    return 0;
  }
  fmt::print("L_max            {} tokens   (budget {}, temperature {}, prompt L/2, L/2 masked; "
             "{} lengths tried in {:.0f} ms)\n",
             lmax.l_max, gib(*o.request.budget), o.request.temperature, lmax.steps_tried, lmax.search_ms);
  if (lmax.l_max > 0) {
    fmt::print("plan at L_max:\n");
    print_report(o, lmax.at_l_max);
  }
  return 0;
}

int run_plan(PlanOptions& o) {
  build_shape(o);
  if (o.find_lmax) return run_find_lmax(o);
  const PlanReport r = plan_step(o.request);
  if (!o.svg.empty()) {
    std::ofstream out(o.svg);
    out << plan_timeline_svg(r);
    if (!out) fail("{}: cannot write the timeline", o.svg);
  }
  if (o.json) {
    std::puts(plan_report_json(r).c_str());
    return 0;
  }
  print_report(o, r);
  if (!o.svg.empty()) fmt::print("timeline written to {}\n", o.svg);
  return 0;
}

// "predicted at 54 GB/s and 650 TFLOP/s: a layer's copy 8.07 ms, the compute it arrives under
// 46.10 ms: hidden".
void print_prediction(const char* copy, double copy_ms, const char* compute, double compute_ms, const PlanReport& r) {
  fmt::print("                 predicted at {:.0f} GB/s and {:.0f} TFLOP/s: {} {:.2f} ms, {} {:.2f} ms: {}\n",
             r.link_bytes_per_second / 1e9, r.compute_flops_per_second / 1e12, copy, copy_ms, compute, compute_ms,
             copy_ms <= compute_ms ? "hidden" : fmt::format("not hidden (about {:.2f} ms a layer exposed)", copy_ms - compute_ms));
}

// "predicted at 360 GB/s bus bandwidth and 650 TFLOP/s: collectives 83.52 ms, a rank's decoder
// layers 193.37 ms of compute a step (43% of compute, if not overlapped)".
void print_collective_prediction(const PlanReport& r) {
  fmt::print("                 predicted at {:.0f} GB/s bus bandwidth and {:.0f} TFLOP/s: collectives {:.2f} ms, "
             "a rank's decoder layers {:.2f} ms of compute a step ({:.0f}% of compute, if not overlapped)\n",
             r.collective_bytes_per_second / 1e9, r.compute_flops_per_second / 1e12, r.collective_ms,
             r.rank_compute_ms, r.rank_compute_ms > 0 ? 100.0 * r.collective_ms / r.rank_compute_ms : 0.0);
}

void print_report(const PlanOptions& o, const PlanReport& r) {
  fmt::print("model            {} ({}, {} layers, hidden {}, vocab {})\n", r.model, r.family, r.layers,
             r.hidden, r.vocab);
  fmt::print("weights          {} ({}{})\n", gib(r.weight_bytes), r.weight_dtype,
             r.tensor_parallel > 1 ? fmt::format("; one rank's shard of {}", r.tensor_parallel) : std::string());
  if (r.context_parallel > 1) {
    fmt::print("context parallel {} ranks, every figure below rank {}'s (the one with the most candidates): {} of "
               "the step's {} rows each, every rank's K and V gathered ({} gathers a step, {} gathered)\n",
               r.context_parallel, r.context_rank, r.tokens, r.context_tokens, r.all_gathers,
               gib(r.all_gather_bytes));
    print_collective_prediction(r);
  }
  if (r.tensor_parallel > 1) {
    fmt::print("tensor parallel  {} ranks, every figure below one rank's: heads, FFN columns and the vocabulary "
               "split; {} all-reduces a step over {} (largest {}), {} of head summaries gathered\n",
               r.tensor_parallel, r.all_reduces, gib(r.all_reduce_bytes), gib(r.largest_all_reduce_bytes),
               gib(r.head_gather_bytes));
    print_collective_prediction(r);
  }
  if (r.streamed_layers > 0) {
    fmt::print("streamed         {} of {} layers' product weights in host memory ({}; {} stay on the device), "
               "staged one layer ahead ({} a layer); CUDA engines: --streamed-layers {}\n",
               r.streamed_layers, r.layers, gib(r.host_weight_bytes), gib(r.device_weight_bytes),
               gib(r.staged_layer_bytes), r.streamed_layers);
    fmt::print("                 >= {:.0f} flops of the step per streamed byte: a layer's transfer hides under the "
               "layer before it where link bandwidth >= compute rate / {:.0f}\n",
               r.flops_per_streamed_byte, r.flops_per_streamed_byte);
    print_prediction("a layer's copy", r.weight_copy_ms, "the compute it arrives under", r.weight_compute_ms, r);
  }
  if (r.residual_placement == "host") {
    fmt::print("residual         in pinned host memory ({}), its rows staged into the arena per chunk and written "
               "back: {} moved a step, at most {} in a layer (CUDA engines choose this themselves where x on the "
               "device cannot fit, or only in chunks of fewer than 8,192 rows)\n",
               gib(r.host_residual_bytes), gib(r.residual_moved_bytes), gib(r.residual_layer_moved_bytes));
    fmt::print("                 >= {:.0f} flops of a layer per moved byte: its rows' copies hide under its compute "
               "where link bandwidth >= compute rate / {:.0f}\n",
               r.flops_per_residual_byte, r.flops_per_residual_byte);
    print_prediction("a layer's copies of x", r.residual_copy_ms, "the layer's compute", r.residual_compute_ms, r);
    fmt::print("                 of those, the write-backs ({} a step, at most {} in a layer) run on the step's "
               "stream, not beside it: about {:.1f} ms added to the step\n",
               gib(r.residual_written_bytes), gib(r.residual_layer_written_bytes), r.residual_writeback_ms);
  }
  if (!r.adapter.empty()) {
    fmt::print("adapter          {}: rank {} on {} projections, merged at load ({})\n", r.adapter, r.adapter_rank,
               r.adapter_projections,
               r.adapter_merged_extra_bytes > 0
                   ? fmt::format("+{} of fp32 copies in the weights", gib(r.adapter_merged_extra_bytes))
                   : std::string("no device bytes added"));
  }
  fmt::print("step             {} sequence{}, {} tokens, {} candidate rows; {} activations, {} head, "
             "chunks qkv={} attention={} ffn={} head={}{}\n",
             r.sequences, r.sequences == 1 ? "" : "s", r.tokens, r.candidates,
             o.request.activations.empty() ? (o.request.device == "cuda" ? "bf16" : "fp32") : o.request.activations,
             o.request.head == "stats" ? "fused" : "materialised-logits", r.qkv_chunks,
             r.attention_chunks, r.ffn_chunks, r.head_chunks,
             r.last_layer_all_rows ? ", last layer over every row" : "");
  if (r.budget) {
    fmt::print("budget           {}   (weights + {} workspace + arena); lazy chunking: {} probes, "
               "{:.2f} ms\n", gib(*r.budget), gib(r.workspace_bytes), r.chunk_probes, r.chunk_search_ms);
    for (const std::string& step : r.chunk_steps) fmt::print("  raised {}\n", step);
  }
  if (r.cache_page_rows > 0)
    fmt::print("KV cache         {}   (resident: every position's K/V, pages of {} positions; {} mapped)\n",
               gib(r.cache_bytes), r.cache_page_rows, gib(r.cache_mapped_bytes));
  fmt::print("activation peak  {}   (planned, {})\n", gib(r.activation_peak), o.request.planner);
  fmt::print("lower bound      {}   (most bytes live at once{})\n", gib(r.lower_bound),
             r.cache_page_rows > 0 ? ", the KV cache included" : "");
  fmt::print("average live     {}\n", gib(r.average_live));
  fmt::print("PAR              {:.3f}   (peak / average)\n", r.par);
  fmt::print("inflation        {:.4f}   (peak / lower bound)\n", r.inflation);
  fmt::print("total            {}   ({}weights + workspace + {}arena mapped in {} KiB granules)\n",
             gib(r.total_bytes()), r.streamed_layers > 0 ? "device " : "", r.cache_page_rows > 0 ? "KV cache + " : "",
             r.granule / 1024);
  fmt::print("graph            {} tensors, {} ops, planned in {:.2f} ms\n", r.tensor_count, r.op_count,
             r.planning_ms);
  fmt::print("live at the peak (op {}, {}):\n", r.peak_op, r.peak_op_name);
  for (const auto& c : r.live_at_peak)
    fmt::print("  {:<10} {:>12}  {:5.1f}%\n", c.category, gib(c.bytes), 100.0 * c.bytes / r.lower_bound);
  fmt::print("largest tensors at the peak:\n");
  for (const auto& t : r.largest_at_peak) fmt::print("  {:<22} {:>12}  ({})\n", t.name, gib(t.bytes), t.category);
}

}  // namespace

Action register_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand(
      "plan", "Plan one denoising step's activation memory from a configuration alone");
  command->add_option("--model", o->request.model, "Preset (llada-8b, dream-7b, llada-moe-7b, llada2-mini, llada2-flash) or model folder")->required();
  command->add_option("--seq-len", o->seq_len, "Tokens in the sequence (prompt + generation)");
  command->add_option("--prompt-len", o->prompt_len, "Prompt tokens (default: half the sequence)");
  command->add_option("--masked", o->masked, "Candidate rows per sequence (default: the non-prompt positions)");
  command->add_option("--batch", o->batch, "Lengths of a batch of sequences, e.g. 4096,1024,512");
  command->add_option("--cached-rows", o->cached_rows,
                      "A cached step: compute only the last N rows of each sequence against a KV cache of all of it "
                      "(candidates: --masked, default N)");
  command->add_option("--device", o->request.device,
                      "cuda (bf16, 2 MiB pages, 64 MiB workspace) or cpu (fp32)")
      ->default_val("cuda");
  command->add_option("--dtype", o->request.activations, "Activation dtype override: bf16 or fp32");
  command->add_option("--budget", o->budget,
                      "Total memory (weights + workspace + arena), e.g. 24GiB: lazy chunking fits it");
  command->add_flag("--find-lmax", o->find_lmax,
                    "Find the longest L (multiple of 1024, prompt L/2, rest masked) within --budget (default: the visible GPU's memory)");
  command->add_option("--temperature", o->request.temperature,
                      "Sampling temperature (Gumbel noise is fused: no memory effect)")
      ->default_val(0.0);
  command->add_option("--head", o->request.head, "LM head: stats (fused, generation) or logits")
      ->default_val("stats");
  command->add_option("--chunks", o->chunks, "Chunk counts qkv,attention,ffn,head (default 1,1,1,1)");
  command->add_option("--planner", o->request.planner,
                      "best (default), greedy-by-area, greedy-by-size or first-fit")
      ->default_val("best");
  command->add_flag("--json", o->json, "Print JSON");
  command->add_option("--svg", o->svg, "Write the memory timeline as an SVG picture");
  command->add_option("--weights", o->request.weights,
                      "Where the layers' product weights live: device (resident), host (streamed from host memory "
                      "one layer ahead), or auto (the fewest layers streamed with which --budget fits the step in chunks "
                      "that fill the GPU)")
      ->default_val("device");
  command->add_option("--residual", o->request.residual,
                      "Where the residual stream lives: auto (on the device where the step fits so, else in host "
                      "memory staged by rows, as CUDA engines do), device, or host")
      ->default_val("auto");
  command->add_option_function<double>(
      "--link-bandwidth", [o](double gbs) { o->request.link_bytes_per_second = gbs * 1e9; },
      "Host-to-device GB/s the copy predictions use (default 54: measured on the H200, PCIe gen 5)");
  command->add_option_function<double>(
      "--compute-rate", [o](double tflops) { o->request.compute_flops_per_second = tflops * 1e12; },
      "TFLOP/s the compute predictions use (default 650: LLaDA-8B's long steps on the H200)");
  add_rank_count_flag(command, "--tensor-parallel", o->request.tensor_parallel,
                      "Plan one rank of N tensor-parallel ranks (heads, FFN columns and vocabulary split; --budget "
                      "is each rank's)");
  add_rank_count_flag(command, "--context-parallel", o->request.context_parallel,
                      "Plan the busiest rank of N context-parallel ranks (each step's rows split, every rank's K and "
                      "V gathered; --budget is each rank's)");
  command->add_option_function<double>(
      "--collective-bandwidth", [o](double gbs) { o->request.collective_bytes_per_second = gbs * 1e9; },
      "All-reduce bus bandwidth in GB/s the collective predictions use (default 360: assumed for NVLink "
      "between H200s, not measured)");
  command->add_option("--adapter", o->request.adapter,
                      "PEFT LoRA adapter folder merged at load: checked against the model, its fp32 copies counted on the CPU");
  return [o] { return run_plan(*o); };
}

}  // namespace mosaic::cli
