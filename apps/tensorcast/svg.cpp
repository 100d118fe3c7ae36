// SVG charts (see svg.h).
#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tcli::svg {
namespace {

constexpr double kLeft = 72, kRight = 24, kTop = 40, kBottom = 56;

std::string esc(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// A tick label: compact, no trailing zeros.
std::string tick_label(double v) {
  if (v == 0) return "0";
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e5 || a < 1e-3)
    std::snprintf(buf, sizeof buf, "%.0e", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string header(int w, int h, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
         "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n" +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + "<text x=\"" + num(w / 2.0) +
         "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + esc(title) + "</text>\n";
}

}  // namespace

const std::string& palette(size_t i) {
  static const std::vector<std::string> colors = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  return colors[i % colors.size()];
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string render(const LinePlot& p) {
  const double W = p.width, H = p.height;
  const double pw = W - kLeft - kRight, ph = H - kTop - kBottom;
  auto ty = [&](double v) { return p.log_y ? std::log10(v) : v; };
  auto usable = [&](double v) { return std::isfinite(v) && (!p.log_y || v > 0); };

  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : p.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.y[i]) || !std::isfinite(s.x[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i])), y1 = std::max(y1, ty(s.y[i]));
    }
    for (const auto& [mx, my] : s.markers) {
      if (!usable(my)) continue;
      x0 = std::min(x0, mx), x1 = std::max(x1, mx);
      y0 = std::min(y0, ty(my)), y1 = std::max(y1, ty(my));
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) {
    const double pad = std::max(std::fabs(y0) * 0.1, p.log_y ? 0.5 : 1e-3);
    y0 -= pad, y1 += pad;
  } else {
    const double pad = (y1 - y0) * 0.05;
    y0 -= pad, y1 += pad;
  }
  auto X = [&](double v) { return kLeft + (v - x0) / (x1 - x0) * pw; };
  auto Y = [&](double v) { return kTop + ph - (ty(v) - y0) / (y1 - y0) * ph; };

  std::string out = header(p.width, p.height, p.title);
  // Axes, grid and ticks.
  out += "<g stroke=\"#ddd\" stroke-width=\"1\">\n";
  std::vector<double> yticks;
  if (p.log_y) {
    for (double e = std::floor(y0); e <= std::ceil(y1); e += 1)
      if (e >= y0 && e <= y1) yticks.push_back(std::pow(10.0, e));
    if (yticks.size() < 2) {
      yticks.clear();
      for (double t : nice_ticks(std::pow(10.0, y0), std::pow(10.0, y1)))
        if (t > 0) yticks.push_back(t);
    }
  } else {
    yticks = nice_ticks(y0, y1);
  }
  const auto xticks = nice_ticks(x0, x1, 8);
  for (double t : yticks)
    out += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(Y(t)) + "\" y2=\"" + num(Y(t)) +
           "\"/>\n";
  for (double t : xticks)
    out += "<line y1=\"" + num(kTop) + "\" y2=\"" + num(kTop + ph) + "\" x1=\"" + num(X(t)) + "\" x2=\"" + num(X(t)) +
           "\"/>\n";
  out += "</g>\n<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double t : yticks)
    out += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(Y(t) + 4) + "\" text-anchor=\"end\">" + tick_label(t) +
           "</text>\n";
  for (double t : xticks)
    out += "<text x=\"" + num(X(t)) + "\" y=\"" + num(kTop + ph + 16) + "\" text-anchor=\"middle\">" + tick_label(t) +
           "</text>\n";
  out += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(H - 12) + "\" text-anchor=\"middle\">" + esc(p.x_label) +
         "</text>\n";
  out += "<text transform=\"translate(16," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         esc(p.y_label) + (p.log_y ? " (log scale)" : "") + "</text>\n";

  // Series, clipped to the plot area.
  out += "<clipPath id=\"plot\"><rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) +
         "\" height=\"" + num(ph) + "\"/></clipPath>\n";
  out += "<g clip-path=\"url(#plot)\">\n";
  for (size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    const std::string color = s.color.empty() ? palette(k) : s.color;
    std::string pts;
    size_t n = 0;
    auto flush = [&] {
      if (n >= 2)
        out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\"" +
               (s.dashed ? " stroke-dasharray=\"6 3\"" : "") + " points=\"" + pts + "\"/>\n";
      else if (n == 1)
        out += "<circle r=\"2.5\" fill=\"" + color + "\" cx=\"" + pts.substr(0, pts.find(',')) + "\" cy=\"" +
               pts.substr(pts.find(',') + 1) + "\"/>\n";
      pts.clear();
      n = 0;
    };
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.y[i])) {  // a gap (NaN/inf or non-positive on a log axis)
        flush();
        continue;
      }
      pts += num(X(s.x[i])) + "," + num(Y(s.y[i])) + " ";
      ++n;
    }
    flush();
    for (const auto& [mx, my] : s.markers) {
      if (!usable(my)) continue;
      const double cx = X(mx), cy = Y(my);
      out += "<path d=\"M" + num(cx - 4) + " " + num(cy - 4) + " L" + num(cx + 4) + " " + num(cy + 4) + " M" +
             num(cx - 4) + " " + num(cy + 4) + " L" + num(cx + 4) + " " + num(cy - 4) +
             "\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n";
    }
  }
  out += "</g>\n";

  // Legend, top right inside the plot.
  std::vector<std::pair<std::string, std::string>> entries;  // name, color ("x" = marker)
  for (size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    entries.emplace_back(s.name, s.color.empty() ? palette(k) : s.color);
    if (!s.markers.empty()) entries.emplace_back(s.markers_name.empty() ? s.name + ": marked" : s.markers_name, "x");
  }
  size_t longest = 0;
  for (const auto& e : entries) longest = std::max(longest, e.first.size());
  const double lw = 36 + 7.0 * longest, lx = kLeft + pw - lw - 8, ly = kTop + 8;
  if (!entries.empty())
    out += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"" + num(lw) + "\" height=\"" +
           num(8 + 18.0 * entries.size()) + "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#bbb\"/>\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const double y = ly + 16 + 18.0 * i;
    if (entries[i].second == "x")
      out += "<path d=\"M" + num(lx + 14) + " " + num(y - 8) + " L" + num(lx + 22) + " " + num(y) + " M" +
             num(lx + 14) + " " + num(y) + " L" + num(lx + 22) + " " + num(y - 8) +
             "\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n";
    else
      out += "<line x1=\"" + num(lx + 8) + "\" x2=\"" + num(lx + 28) + "\" y1=\"" + num(y - 4) + "\" y2=\"" +
             num(y - 4) + "\" stroke=\"" + entries[i].second + "\" stroke-width=\"2\"/>\n";
    out += "<text x=\"" + num(lx + 32) + "\" y=\"" + num(y) + "\">" + esc(entries[i].first) + "</text>\n";
  }
  return out + "</svg>\n";
}

std::string render(const BarChart& c) {
  const double W = c.width, H = c.height;
  const double pw = W - kLeft - kRight, ph = H - kTop - kBottom;
  double hi = 0;
  for (const auto& b : c.bars)
    if (std::isfinite(b.value)) hi = std::max(hi, b.value);
  if (hi <= 0) hi = 1;
  const auto ticks = nice_ticks(0, hi * 1.12);
  const double top = std::max(ticks.back(), hi * 1.12);
  auto Y = [&](double v) { return kTop + ph - v / top * ph; };

  std::string out = header(c.width, c.height, c.title);
  out += "<g stroke=\"#ddd\">\n";
  for (double t : ticks)
    out += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(Y(t)) + "\" y2=\"" + num(Y(t)) +
           "\"/>\n";
  out += "</g>\n";
  for (double t : ticks)
    out += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(Y(t) + 4) + "\" text-anchor=\"end\">" + tick_label(t) +
           "</text>\n";
  out += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(kTop + ph) + "\" y2=\"" +
         num(kTop + ph) + "\" stroke=\"#333\"/>\n";
  out += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" y2=\"" + num(kTop + ph) +
         "\" stroke=\"#333\"/>\n";
  out += "<text transform=\"translate(16," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         esc(c.y_label) + "</text>\n";
  const double slot = pw / std::max<size_t>(1, c.bars.size()), bw = slot * 0.6;
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    const double v = std::isfinite(b.value) ? std::max(0.0, b.value) : 0;
    const double x = kLeft + slot * i + (slot - bw) / 2;
    out += "<rect x=\"" + num(x) + "\" y=\"" + num(Y(v)) + "\" width=\"" + num(bw) + "\" height=\"" +
           num(kTop + ph - Y(v)) + "\" fill=\"" + (b.color.empty() ? palette(i) : b.color) + "\"/>\n";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", b.value);
    out += "<text x=\"" + num(x + bw / 2) + "\" y=\"" + num(Y(v) - 5) + "\" text-anchor=\"middle\">" +
           esc(b.note.empty() ? std::string(buf) : b.note) + "</text>\n";
    out += "<text x=\"" + num(x + bw / 2) + "\" y=\"" + num(kTop + ph + 16) + "\" text-anchor=\"middle\">" +
           esc(b.label) + "</text>\n";
  }
  return out + "</svg>\n";
}

}  // namespace tcli::svg
