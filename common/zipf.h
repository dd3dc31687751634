// ZipfSampler: draws k in [1, n] with P(k) proportional to 1 / k^s (s > 0), in constant time and
// memory whatever n, by rejection-inversion (Hormann and Derflinger 1996, "Rejection-inversion to
// generate variates from monotone discrete distributions"). The ids of a power law: the sparse
// benchmark's rows and the categorical dataset's features are drawn from it.
//
// Contract: a value type; Sample() takes the caller's generator, so the draws are a pure function
// of its state. Thread-compatible.
#ifndef TOWERPS_COMMON_ZIPF_H_
#define TOWERPS_COMMON_ZIPF_H_

#include <cmath>
#include <cstdint>
#include <random>

namespace towerps {

class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double exponent)
      : n_(n),
        s_(exponent),
        h_x1_(H(1.5) - 1.0),
        h_n_(H(static_cast<double>(n) + 0.5)),
        squeeze_(2.0 - HInverse(H(2.5) - Pow(2.0))) {}

  template <typename Rng>
  int64_t Sample(Rng& rng) {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (;;) {
      const double u = h_n_ + uniform(rng) * (h_x1_ - h_n_);
      const double x = HInverse(u);
      int64_t k = static_cast<int64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      const double kd = static_cast<double>(k);
      if (kd - x <= squeeze_ || u >= H(kd + 0.5) - Pow(kd)) return k;
    }
  }

 private:
  // h(x) = x^-s, and H, an antiderivative of it, with its inverse; written with log1p/expm1
  // forms that stay exact as s approaches 1.
  double Pow(double x) const { return std::exp(-s_ * std::log(x)); }
  double H(double x) const {
    const double log_x = std::log(x);
    return Helper2((1.0 - s_) * log_x) * log_x;
  }
  double HInverse(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;  // rounding at the edge of the support
    return std::exp(Helper1(t) * x);
  }
  // log1p(x) / x and expm1(x) / x, each 1 at x = 0.
  static double Helper1(double x) { return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x / 2; }
  static double Helper2(double x) { return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x / 2; }

  int64_t n_;
  double s_;
  double h_x1_, h_n_, squeeze_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_ZIPF_H_
