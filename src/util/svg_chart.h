#pragma once
// A small line chart as a standalone SVG document: categorical x positions, one or more
// panels stacked vertically (each with its own y axis), one line per series. Points
// with no value (NaN) are left out and break the line.
#include <string>
#include <vector>

namespace epq {

struct ChartSeries {
  std::string name;
  std::vector<double> values;  // one per x label; NaN for none
};

struct ChartPanel {
  std::string y_label;
  bool log_scale = false;
  std::vector<ChartSeries> series;
};

std::string render_line_chart(const std::string& title, const std::string& x_label, const std::vector<std::string>& x_labels,
                              const std::vector<ChartPanel>& panels);

}  // namespace epq
