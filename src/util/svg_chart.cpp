#include "util/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace epq {
namespace {

constexpr double kWidth = 760, kPanelHeight = 260, kLeft = 70, kRight = 180, kTop = 40, kGap = 60;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string tick_label(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : v >= 1 ? fmt::format("{:.3g}", v) : fmt::format("{:.2g}", v); }

}  // namespace

std::string render_line_chart(const std::string& title, const std::string& x_label, const std::vector<std::string>& x_labels,
                              const std::vector<ChartPanel>& panels) {
  const double plot_w = kWidth - kLeft - kRight;
  const double height = kTop + static_cast<double>(panels.size()) * (kPanelHeight + kGap) + 20;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{:.0f}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
      kWidth, height, kWidth / 2, escape(title));
  const size_t n = x_labels.size();
  auto x_at = [&](size_t i) { return kLeft + (n <= 1 ? plot_w / 2 : plot_w * static_cast<double>(i) / static_cast<double>(n - 1)); };
  for (size_t p = 0; p < panels.size(); ++p) {
    const ChartPanel& panel = panels[p];
    const double top = kTop + static_cast<double>(p) * (kPanelHeight + kGap), bottom = top + kPanelHeight;
    double lo = INFINITY, hi = -INFINITY;
    for (const ChartSeries& s : panel.series) {
      for (double v : s.values) {
        if (std::isnan(v) || (panel.log_scale && v <= 0)) continue;
        lo = std::min(lo, v), hi = std::max(hi, v);
      }
    }
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    double step = 0;  // linear scale: a round tick step (1, 2 or 5 times a power of ten)
    if (panel.log_scale) {
      lo = std::pow(10.0, std::floor(std::log10(lo))), hi = std::pow(10.0, std::ceil(std::log10(hi)));
    } else {
      lo = std::min(0.0, lo), hi = hi <= lo ? lo + 1 : hi;
      const double raw = (hi - lo) / 5, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
      step = raw <= magnitude ? magnitude : raw <= 2 * magnitude ? 2 * magnitude : raw <= 5 * magnitude ? 5 * magnitude : 10 * magnitude;
      hi = lo + std::ceil((hi - lo) / step) * step;
    }
    auto y_at = [&](double v) {
      const double f = panel.log_scale ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
      return bottom - f * kPanelHeight;
    };
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft, top,
                       plot_w, kPanelHeight);
    // y grid and labels
    std::vector<double> ticks;
    if (panel.log_scale) {
      for (double t = lo; t <= hi * 1.0001; t *= 10) ticks.push_back(t);
    } else {
      for (double t = lo; t <= hi + step / 2; t += step) ticks.push_back(t);
    }
    for (double t : ticks) {
      const double y = y_at(t);
      svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", kLeft, y, kLeft + plot_w, y);
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, y + 4, tick_label(t));
    }
    svg += fmt::format("<text transform=\"translate(18,{:.0f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n", (top + bottom) / 2,
                       escape(panel.y_label));
    for (size_t i = 0; i < n; ++i) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>\n", x_at(i), bottom + 16, escape(x_labels[i]));
    }
    if (p + 1 == panels.size()) {
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>\n", kLeft + plot_w / 2, bottom + 36, escape(x_label));
    }
    for (size_t s = 0; s < panel.series.size(); ++s) {
      const ChartSeries& series = panel.series[s];
      const char* color = kColors[s % std::size(kColors)];
      std::string path;
      for (size_t i = 0; i < series.values.size() && i < n; ++i) {
        const double v = series.values[i];
        if (std::isnan(v) || (panel.log_scale && v <= 0)) {
          if (!path.empty()) svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, path);
          path.clear();
          continue;
        }
        path += fmt::format("{:.1f},{:.1f} ", x_at(i), y_at(v));
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", x_at(i), y_at(v), color);
      }
      if (!path.empty()) svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, path);
      const double ly = top + 14 + 18 * static_cast<double>(s);
      svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"{}\" stroke-width=\"2\"/>\n", kLeft + plot_w + 12,
                         ly, kLeft + plot_w + 32, ly, color);
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n", kLeft + plot_w + 38, ly + 4, escape(series.name));
    }
  }
  return svg + "</svg>\n";
}

}  // namespace epq
