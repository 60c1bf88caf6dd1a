// The memory timeline picture: live bytes after each op, stacked by tensor category, with the
// planned peak (what the arena maps) and the lower bound (most bytes live at once) marked; with
// anything in pinned host memory (streamed weights, the residual stream) a second panel under it
// shows that memory and what each op copies in from it and back.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mosaic/plan.h"

namespace mosaic {
namespace {

constexpr double kWidth = 1100, kHeight = 520;
constexpr double kLeft = 80, kRight = 190, kTop = 50, kBottom = 60;
// The host panel, under the device's when anything lives in host memory: its gap and height.
constexpr double kHostGap = 48, kHostHeight = 130;
constexpr const char* kCopyInColor = "#4e79a7";
constexpr const char* kCopyOutColor = "#e15759";
constexpr const char* kColors[] = {"#9e9e9e", "#4e79a7", "#a0cbe8", "#f28e2b", "#e15759",
                                   "#76b7b2", "#59a14f", "#b07aa1", "#edc948", "#ff9da7", "#9c755f"};
constexpr size_t kColorCount = sizeof(kColors) / sizeof(kColors[0]);

// The order categories are stacked in, bottom first: the resident KV cache under everything the
// step allocates, then the rest in category order.
std::vector<size_t> stacking_order(const PlanReport& report) {
  std::vector<size_t> order;
  for (size_t k = 0; k < report.categories.size(); ++k)
    if (report.categories[k] == "kv_cache") order.push_back(k);
  for (size_t k = 0; k < report.categories.size(); ++k)
    if (report.categories[k] != "kv_cache") order.push_back(k);
  return order;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) bytes /= 1024, ++unit;
  return fmt::format("{:.3g} {}", bytes, units[unit]);
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// The host panel: pinned host memory's contents (constant through the step) and, per op, the
// bytes copied in (up) and back (down), on its own scale; `x` maps an op to its left edge.
template <typename OpX>
std::string host_panel(const PlanReport& report, double top, double plot_w, OpX x) {
  const size_t ops = report.copied_in.size();
  const double mid = top + kHostHeight / 2, half = kHostHeight / 2 - 4;
  uint64_t most = 1, copied_in = 0, copied_out = 0;
  for (size_t op = 0; op < ops; ++op) {
    most = std::max({most, report.copied_in[op], report.copied_out[op]});
    copied_in += report.copied_in[op], copied_out += report.copied_out[op];
  }
  std::string contents;
  if (report.host_weight_bytes > 0)
    contents += fmt::format("{} layers' weights {}", report.streamed_layers, human_bytes(double(report.host_weight_bytes)));
  if (report.host_residual_bytes > 0)
    contents += fmt::format("{}residual stream {}", contents.empty() ? "" : " + ",
                            human_bytes(double(report.host_residual_bytes)));
  std::string svg = fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\" font-weight=\"bold\">pinned host memory: {}; per op, the bytes it copies</text>\n",
      kLeft, top - 10, escape(contents));
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f6f6\" stroke=\"black\"/>\n", kLeft,
                     top, plot_w, kHostHeight);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#999999\"/>\n", kLeft, mid,
                     kLeft + plot_w);
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n"
                     "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                     kLeft - 6, mid - half + 4, human_bytes(double(most)), kLeft - 6, mid + half + 4,
                     human_bytes(double(most)));
  // One bar per copying op, at least a pixel wide so that thousands of ops still show: copies in
  // rise from the middle line, copies back hang from it.
  for (size_t op = 0; op < ops; ++op) {
    const double left = x(double(op)), width = std::max(1.0, x(double(op + 1)) - left);
    const auto bar = [&](uint64_t bytes, bool up, const char* color) {
      if (bytes == 0) return;
      const double h = half * double(bytes) / double(most);
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", left,
                         up ? mid - h : mid, width, h, color);
    };
    bar(report.copied_in[op], true, kCopyInColor);
    bar(report.copied_out[op], false, kCopyOutColor);
  }
  svg += fmt::format("<rect x=\"{0}\" y=\"{1:.1f}\" width=\"14\" height=\"14\" fill=\"{2}\"/><text x=\"{3}\" "
                     "y=\"{4:.1f}\">in: {8}</text>\n"
                     "<rect x=\"{0}\" y=\"{5:.1f}\" width=\"14\" height=\"14\" fill=\"{6}\"/><text x=\"{3}\" "
                     "y=\"{7:.1f}\">back: {9}</text>\n",
                     kLeft + plot_w + 10, mid - 30, kCopyInColor, kLeft + plot_w + 30, mid - 18, mid + 16,
                     kCopyOutColor, mid + 28, human_bytes(double(copied_in)), human_bytes(double(copied_out)));
  return svg;
}

}  // namespace

std::string plan_timeline_svg(const PlanReport& report) {
  const size_t ops = report.timeline.size();
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const bool host = !report.copied_in.empty();
  const double height = kHeight + (host ? kHostGap + kHostHeight : 0);
  // The planned peak of everything the step touches: a cached step's KV cache under the arena.
  const double peak = double(report.cache_bytes + report.activation_peak);
  const double top_bytes = std::max<double>(1.0, peak * 1.08);
  const std::vector<size_t> order = stacking_order(report);
  auto x = [&](double op) { return kLeft + plot_w * op / std::max<double>(1.0, double(ops)); };
  auto y = [&](double bytes) { return kTop + plot_h * (1.0 - bytes / top_bytes); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, height);
  svg += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}: {} tokens, {} candidates"
      " — planned peak {}{}, lower bound {}, PAR {:.2f}</text>\n",
      kLeft, escape(report.model), report.tokens, report.candidates, human_bytes(peak),
      report.cache_bytes > 0 ? fmt::format(" ({} of it KV cache)", human_bytes(double(report.cache_bytes))) : "",
      human_bytes(double(report.lower_bound)), report.par);

  // Axes and grid.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kLeft, kTop, kTop + plot_h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft, kTop + plot_h, kLeft + plot_w);
  // Ticks at 1, 2 or 5 times a power of ten of the display unit.
  const double unit = top_bytes >= 2.0 * (1 << 30) ? double(1 << 30) : double(1 << 20);
  const double raw_step = top_bytes / unit / 4.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  const double nice = raw_step / magnitude < 2 ? 1 : raw_step / magnitude < 5 ? 2 : 5;
  const double tick_step = nice * magnitude * unit;
  for (double bytes = 0; bytes <= top_bytes; bytes += tick_step) {
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#dddddd\"/>\n"
                       "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       kLeft, y(bytes), kLeft + plot_w, y(bytes), kLeft - 6, y(bytes) + 4,
                       human_bytes(bytes));
  }

  // Stacked areas, bottom category first: each band is the polygon between its lower and upper
  // cumulative curves, drawn as steps (the live set is constant during an op).
  std::vector<double> lower(ops, 0.0);
  for (const size_t k : order) {
    std::vector<double> upper(ops);
    bool any = false;
    for (size_t op = 0; op < ops; ++op) {
      upper[op] = lower[op] + double(report.timeline[op][k]);
      any = any || report.timeline[op][k] > 0;
    }
    if (any) {
      std::string points;
      for (size_t op = 0; op < ops; ++op)
        points += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x(op), y(upper[op]), x(op + 1), y(upper[op]));
      for (size_t op = ops; op-- > 0;)
        points += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x(op + 1), y(lower[op]), x(op), y(lower[op]));
      svg += fmt::format("<polygon points=\"{}\" fill=\"{}\" stroke=\"none\"/>\n", points, kColors[k % kColorCount]);
    }
    lower = std::move(upper);
  }

  if (host) svg += host_panel(report, kTop + plot_h + kHostGap, plot_w, x);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">op (execution order, {} ops; "
                     "{} layers)</text>\n",
                     kLeft + plot_w / 2, height - 20, ops, report.layers);

  // The planned peak, the lower bound and where it is reached.
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"black\" "
                     "stroke-dasharray=\"6,4\"/>\n<text x=\"{}\" y=\"{:.1f}\">planned peak {}</text>\n",
                     kLeft, y(peak), kLeft + plot_w, y(peak), kLeft + plot_w + 6, y(peak) + 4, human_bytes(peak));
  const double peak_x = x(report.peak_op + 0.5);
  const char* anchor = peak_x < kLeft + plot_w * 0.25 ? "start" : peak_x > kLeft + plot_w * 0.75 ? "end" : "middle";
  svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#c00000\"/>\n"
                     "<text x=\"{:.1f}\" y=\"{}\" fill=\"#c00000\" text-anchor=\"{}\">lower bound "
                     "{} reached at op {} ({})</text>\n",
                     peak_x, kTop, peak_x, kTop + plot_h, peak_x, kTop - 6, anchor,
                     human_bytes(double(report.lower_bound)), report.peak_op,
                     escape(report.peak_op_name));

  // Legend, top category first (as stacked).
  double legend_y = kTop + 40;
  for (size_t i = order.size(); i-- > 0;) {
    const size_t k = order[i];
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
                       kLeft + plot_w + 10, legend_y, kColors[k % kColorCount], kLeft + plot_w + 30,
                       legend_y + 12, escape(report.categories[k]));
    legend_y += 20;
  }
  // Beside the arena the device holds the weights not streamed (and the workspace).
  if (host)
    svg += fmt::format("<text x=\"{0}\" y=\"{1:.1f}\">beside the arena:</text><text x=\"{0}\" y=\"{2:.1f}\">{3} of "
                       "weights</text>\n",
                       kLeft + plot_w + 10, legend_y + 20, legend_y + 36, human_bytes(double(report.device_weight_bytes)));
  svg += "</svg>\n";
  return svg;
}

}  // namespace mosaic
