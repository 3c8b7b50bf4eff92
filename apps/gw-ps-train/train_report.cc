// CSV and a hand-written SVG plot for gw-ps-train (no plotting dependency).
#include "train_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace gw::psapp {

namespace {

Status open_out(const std::string& path, std::ofstream& f) {
  f.open(path);
  if (!f) return Status(Code::kSystemError, "cannot write " + path, errno);
  return Status();
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks over `span`.
double tick_step(double span, int n) {
  const double raw = span / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s)
    o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

}  // namespace

Status write_csv(const std::string& path, const std::vector<Series>& runs) {
  std::ofstream f;
  GW_RETURN_IF_ERROR(open_out(path, f));
  f << "run,iter,wall_s,loss,accuracy\n";
  for (const auto& s : runs)
    for (const auto& p : s.pts)
      f << s.label << ',' << p.iter << ',' << fmt("%.4f", p.wall_s) << ',' << fmt("%.6f", p.loss)
        << ',' << fmt("%.4f", p.acc) << '\n';
  return f ? Status() : Status(Code::kSystemError, "writing " + path + " failed", errno);
}

Status write_svg(const std::string& path, const std::vector<Series>& runs,
                 const std::string& title) {
  const double W = 860, H = 520, l = 70, r = 230, t = 40, b = 55;
  double xmax = 0, ymin = 1e300, ymax = 0;
  for (const auto& s : runs) {
    for (const auto& p : s.pts) {
      xmax = std::max(xmax, p.wall_s);
      ymin = std::min(ymin, p.loss);
      ymax = std::max(ymax, p.loss);
    }
  }
  if (xmax <= 0) xmax = 1;
  if (ymin > ymax) ymin = 0, ymax = 1;
  const double ys = tick_step(std::max(ymax - ymin, 1e-6), 6);
  ymin = std::floor(ymin / ys) * ys;
  ymax = std::ceil(ymax / ys) * ys;
  if (ymax <= ymin) ymax = ymin + ys;
  const double xs = tick_step(xmax, 8);
  xmax = std::ceil(xmax / xs) * xs;
  auto X = [&](double v) { return l + (W - l - r) * v / xmax; };
  auto Y = [&](double v) { return H - b - (H - t - b) * (v - ymin) / (ymax - ymin); };

  std::ofstream f;
  GW_RETURN_IF_ERROR(open_out(path, f));
  f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << escape(title) << "</text>\n";
  for (double v = 0; v <= xmax + xs / 2; v += xs) {
    f << "<line x1=\"" << X(v) << "\" y1=\"" << t << "\" x2=\"" << X(v) << "\" y2=\"" << H - b
      << "\" stroke=\"#ddd\"/><text x=\"" << X(v) << "\" y=\"" << H - b + 16
      << "\" text-anchor=\"middle\">" << fmt("%g", v) << "</text>\n";
  }
  for (double v = ymin; v <= ymax + ys / 2; v += ys) {
    f << "<line x1=\"" << l << "\" y1=\"" << Y(v) << "\" x2=\"" << W - r << "\" y2=\"" << Y(v)
      << "\" stroke=\"#ddd\"/><text x=\"" << l - 6 << "\" y=\"" << Y(v) + 4
      << "\" text-anchor=\"end\">" << fmt("%g", v) << "</text>\n";
  }
  f << "<rect x=\"" << l << "\" y=\"" << t << "\" width=\"" << W - l - r << "\" height=\""
    << H - t - b << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << (l + W - r) / 2 << "\" y=\"" << H - 12
    << "\" text-anchor=\"middle\">wall time (s)</text>\n"
    << "<text transform=\"translate(18," << (t + H - b) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">loss (held-out set)</text>\n";
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* c = kColors[i % 8];
    const bool dashed = runs[i].label.find("straggler") != std::string::npos;
    f << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\""
      << (dashed ? " stroke-dasharray=\"6,3\"" : "") << " points=\"";
    for (const auto& p : runs[i].pts)
      f << fmt("%.1f", X(p.wall_s)) << ',' << fmt("%.1f", Y(p.loss)) << ' ';
    f << "\"/>\n";
    const double ly = t + 14 + 20.0 * static_cast<double>(i);
    f << "<line x1=\"" << W - r + 12 << "\" y1=\"" << ly << "\" x2=\"" << W - r + 42 << "\" y2=\""
      << ly << "\" stroke=\"" << c << "\" stroke-width=\"2\""
      << (dashed ? " stroke-dasharray=\"6,3\"" : "") << "/><text x=\"" << W - r + 48 << "\" y=\""
      << ly + 4 << "\">" << escape(runs[i].label) << "</text>\n";
  }
  f << "</svg>\n";
  return f ? Status() : Status(Code::kSystemError, "writing " + path + " failed", errno);
}

}  // namespace gw::psapp
