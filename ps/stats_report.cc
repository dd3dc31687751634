#include "ps/stats_report.h"

namespace towerps::ps {

double HistogramMean(const std::vector<uint64_t>& h) {
  double n = 0, sum = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    n += static_cast<double>(h[i]);
    sum += static_cast<double>(h[i]) * static_cast<double>(i);
  }
  return n > 0 ? sum / n : 0;
}

double HistogramP99(const std::vector<uint64_t>& h) {
  uint64_t n = 0;
  for (uint64_t c : h) n += c;
  uint64_t seen = 0;
  for (size_t i = 0; i < h.size() && n > 0; ++i) {
    seen += h[i];
    if (static_cast<double>(seen) >= 0.99 * static_cast<double>(n)) return static_cast<double>(i);
  }
  return 0;
}

}  // namespace towerps::ps
