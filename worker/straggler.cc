#include "worker/straggler.h"

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "common/parse.h"

namespace towerps::worker {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

Result<double> ParseNumber(const std::string& text, const std::string& flag) {
  TOWERPS_ASSIGN_OR_RETURN(const double v, ParseDouble(text, flag));
  if (v < 0) return InvalidArgumentError(flag + ": '" + text + "' is not a non-negative number");
  return v;
}

}  // namespace

Result<double> ParseDuration(const std::string& text, const std::string& flag) {
  struct Unit {
    const char* suffix;
    double scale;
  };
  double seconds = 0;
  bool have_unit = false;
  for (const Unit& u : {Unit{"ms", 1e-3}, Unit{"us", 1e-6}, Unit{"s", 1.0}}) {
    const std::string suffix = u.suffix;
    if (text.size() > suffix.size() &&
        text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      TOWERPS_ASSIGN_OR_RETURN(double v,
                               ParseNumber(text.substr(0, text.size() - suffix.size()), flag));
      seconds = v * u.scale;
      have_unit = true;
      break;
    }
  }
  if (!have_unit) {
    TOWERPS_ASSIGN_OR_RETURN(seconds, ParseNumber(text, flag));
  }
  if (seconds > kMaxDelaySeconds) {
    return InvalidArgumentError(flag + ": '" + text + "' is over an hour (" +
                                std::to_string(static_cast<int>(kMaxDelaySeconds)) +
                                " s), the longest per-step delay; write e.g. 40ms or 2s");
  }
  return seconds;
}

Result<StragglerPlan> StragglerPlan::Parse(const std::string& straggler, const std::string& dist,
                                           const std::string& slow_workers, int workers) {
  StragglerPlan p;
  p.workers_ = workers;
  if (!straggler.empty()) {
    const auto parts = Split(straggler, ':');
    if (parts.size() != 2) {
      return InvalidArgumentError("--straggler=" + straggler + " is not RANK:DELAY (e.g. 1:40ms)");
    }
    TOWERPS_ASSIGN_OR_RETURN(double rank, ParseNumber(parts[0], "--straggler rank"));
    if (rank != std::floor(rank) || rank >= workers) {
      return InvalidArgumentError("--straggler rank " + parts[0] + " is not a worker rank 0.." +
                                  std::to_string(workers - 1));
    }
    p.fixed_rank_ = static_cast<int>(rank);
    TOWERPS_ASSIGN_OR_RETURN(p.fixed_seconds_, ParseDuration(parts[1], "--straggler delay"));
  }
  if (!dist.empty()) {
    const auto parts = Split(dist, ':');
    if (parts.size() == 2 && parts[0] == "exp") {
      p.dist_ = Dist::kExponential;
      TOWERPS_ASSIGN_OR_RETURN(p.a_, ParseDuration(parts[1], "--straggler-dist mean"));
    } else if (parts.size() == 3 && parts[0] == "uniform") {
      p.dist_ = Dist::kUniform;
      TOWERPS_ASSIGN_OR_RETURN(p.a_, ParseDuration(parts[1], "--straggler-dist low"));
      TOWERPS_ASSIGN_OR_RETURN(p.b_, ParseDuration(parts[2], "--straggler-dist high"));
      if (p.b_ < p.a_) {
        return InvalidArgumentError("--straggler-dist=" + dist + ": HI is below LO");
      }
    } else {
      return InvalidArgumentError("--straggler-dist=" + dist +
                                  " is not exp:MEAN or uniform:LO:HI (e.g. exp:20ms)");
    }
  }
  if (!slow_workers.empty()) {
    const auto parts = Split(slow_workers, ':');
    if (parts.size() != 2) {
      return InvalidArgumentError("--slow-workers=" + slow_workers + " is not K:FACTOR (e.g. 1:3)");
    }
    TOWERPS_ASSIGN_OR_RETURN(double k, ParseNumber(parts[0], "--slow-workers count"));
    TOWERPS_ASSIGN_OR_RETURN(p.slow_factor_, ParseNumber(parts[1], "--slow-workers factor"));
    if (k != std::floor(k) || k > workers || p.slow_factor_ < 1 ||
        p.slow_factor_ > kMaxSlowFactor) {
      return InvalidArgumentError("--slow-workers=" + slow_workers + ": K must be 0.." +
                                  std::to_string(workers) + " and FACTOR between 1 and " +
                                  std::to_string(static_cast<int>(kMaxSlowFactor)));
    }
    p.slow_count_ = static_cast<int>(k);
  }
  return p;
}

bool StragglerPlan::empty() const {
  return fixed_rank_ < 0 && dist_ == Dist::kNone && slow_count_ == 0;
}

double StragglerPlan::DelaySeconds(int rank, int64_t step, uint64_t seed,
                                   double last_compute_seconds) const {
  double delay = 0;
  if (rank == fixed_rank_) delay += fixed_seconds_;
  if (dist_ != Dist::kNone) {
    std::seed_seq seq{static_cast<uint32_t>(seed),       static_cast<uint32_t>(seed >> 32),
                      static_cast<uint32_t>(rank),       static_cast<uint32_t>(step),
                      static_cast<uint32_t>(step >> 32), 0x57a99u};
    std::mt19937_64 rng(seq);
    if (dist_ == Dist::kExponential) {
      delay += a_ > 0 ? std::exponential_distribution<double>(1.0 / a_)(rng) : 0;
    } else {
      delay += std::uniform_real_distribution<double>(a_, b_)(rng);
    }
  }
  if (rank >= workers_ - slow_count_) delay += (slow_factor_ - 1) * last_compute_seconds;
  return delay;
}

}  // namespace towerps::worker
