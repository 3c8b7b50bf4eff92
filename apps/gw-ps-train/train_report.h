/// @file train_report.h
/// Output of gw-ps-train: loss curves as CSV and as an SVG line plot (one line per run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gw_status.h"

namespace gw::psapp {

struct Point {
  int64_t iter = 0;  ///< the evaluating worker's clock
  double wall_s = 0, loss = 0, acc = 0;
};

struct Series {
  std::string label;  ///< e.g. "ssp(2)+straggler 20ms"
  std::vector<Point> pts;
};

/// Columns: run,iter,wall_s,loss,accuracy. @return SystemError naming the file.
Status write_csv(const std::string& path, const std::vector<Series>& runs);
/// Loss against wall time, one polyline per run, axes with ticks, legend.
Status write_svg(const std::string& path, const std::vector<Series>& runs,
                 const std::string& title);

}  // namespace gw::psapp
