// SVG charts for `tensorcast report`: line plots (polylines with axes, ticks, a legend and
// optional point markers, e.g. skipped steps) and bar charts. Self-contained SVG 1.1 that
// GitHub and browsers render; no scripts, no external fonts.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tcli::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::string color;  // empty: from the palette
  bool dashed = false;
  // Points drawn as markers (x, y) with a legend entry of their own when non-empty.
  std::vector<std::pair<double, double>> markers;
  std::string markers_name;
};

struct LinePlot {
  std::string title, x_label, y_label;
  bool log_y = false;  // log10 axis (non-positive values are dropped)
  std::vector<Series> series;
  int width = 720, height = 400;
};

struct Bar {
  std::string label;
  double value = 0;
  std::string color;  // empty: from the palette
  std::string note;   // printed above the bar instead of the value when non-empty
};

struct BarChart {
  std::string title, y_label;
  std::vector<Bar> bars;
  int width = 560, height = 340;
};

std::string render(const LinePlot& plot);
std::string render(const BarChart& chart);

// "Nice" tick positions covering [lo, hi] (1, 2, 5 times a power of ten).
std::vector<double> nice_ticks(double lo, double hi, int target = 6);
const std::string& palette(size_t i);

}  // namespace tcli::svg
