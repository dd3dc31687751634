#include "worker/train/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace towerps::worker {
namespace {

using Clock = StepProfile::Clock;

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

bool Seen(Clock::time_point t) { return t != Clock::time_point{}; }

}  // namespace

StepProfile::StepProfile(int steps, std::vector<std::string> names, std::vector<int64_t> bytes)
    : steps_(steps), names_(std::move(names)), bytes_(std::move(bytes)), recording_(steps > 0) {}

void StepProfile::BeginStep() {
  if (!recording()) return;
  MutexLock lock(&mu_);
  current_ = Step{.begin = Clock::now(), .at = {}};
  current_.at.assign(names_.size(), {});
  open_ = true;
}

void StepProfile::EndCompute() {
  if (!recording()) return;
  MutexLock lock(&mu_);
  if (open_) current_.compute_end = Clock::now();
}

void StepProfile::EndStep() {
  if (!recording()) return;
  MutexLock lock(&mu_);
  if (!open_) return;
  current_.end = Clock::now();
  open_ = false;
  done_.push_back(std::move(current_));
  if (static_cast<int>(done_.size()) >= steps_) recording_.store(false, std::memory_order_relaxed);
}

void StepProfile::Mark(int v, Event e, Clock::time_point when) {
  if (!recording()) return;
  MutexLock lock(&mu_);
  if (!open_ || v < 0 || static_cast<size_t>(v) >= current_.at.size()) return;
  Clock::time_point& slot = current_.at[static_cast<size_t>(v)][static_cast<size_t>(e)];
  if (!Seen(slot)) slot = when;  // the first wins
}

std::optional<ProfileReport> StepProfile::Report() const {
  MutexLock lock(&mu_);
  if (done_.empty()) return std::nullopt;
  ProfileReport r;
  r.steps = static_cast<int>(done_.size());
  std::vector<double> step, compute, first_push, before_end;
  std::vector<std::array<std::vector<double>, kEvents>> events(names_.size());
  // Per critical variable: its segments, one entry per step it was critical in.
  std::map<size_t, std::array<std::vector<double>, 4>> critical;
  for (const Step& s : done_) {
    step.push_back(Ms(s.begin, s.end));
    compute.push_back(Ms(s.begin, s.compute_end));
    double first = -1;
    int sent = 0, early = 0;
    size_t last = names_.size();
    for (size_t v = 0; v < s.at.size(); ++v) {
      for (size_t e = 0; e < kEvents; ++e) {
        if (Seen(s.at[v][e])) events[v][e].push_back(Ms(s.begin, s.at[v][e]));
      }
      const Clock::time_point sent_at = s.at[v][static_cast<size_t>(Event::kSent)];
      if (Seen(sent_at)) {
        ++sent;
        early += sent_at < s.compute_end ? 1 : 0;
        const double ms = Ms(s.begin, sent_at);
        first = first < 0 ? ms : std::min(first, ms);
      }
      const Clock::time_point arrived = s.at[v][static_cast<size_t>(Event::kArrived)];
      if (Seen(arrived) &&
          (last == names_.size() || arrived > s.at[last][static_cast<size_t>(Event::kArrived)])) {
        last = v;
      }
    }
    if (first >= 0) first_push.push_back(first);
    if (sent > 0) before_end.push_back(static_cast<double>(early) / sent);
    if (last == names_.size()) continue;
    const auto& a = s.at[last];
    const auto at = [&](Event e) { return a[static_cast<size_t>(e)]; };
    if (!Seen(at(Event::kGradient)) || !Seen(at(Event::kSent))) continue;
    auto& c = critical[last];
    c[0].push_back(Ms(s.begin, at(Event::kGradient)));
    c[1].push_back(Ms(at(Event::kGradient), at(Event::kSent)));
    c[2].push_back(Ms(at(Event::kSent), at(Event::kArrived)));
    c[3].push_back(Ms(at(Event::kArrived), s.end));
  }
  r.step_ms = Median(step);
  r.compute_ms = Median(compute);
  r.first_push_ms = Median(first_push);
  r.pushes_before_compute_end = Median(before_end);
  for (size_t v = 0; v < names_.size(); ++v) {
    auto& e = events[v];
    r.variables.push_back({.name = names_[v],
                           .bytes = v < bytes_.size() ? bytes_[v] : 0,
                           .gradient_ms = Median(e[0]),
                           .sent_ms = Median(e[1]),
                           .answered_ms = Median(e[2]),
                           .arrived_ms = Median(e[3]),
                           .loaded_ms = Median(e[4])});
  }
  // The variable most often last, and its segments' medians.
  size_t most = 0, best = names_.size();
  for (const auto& [v, c] : critical) {
    if (c[0].size() > most) {
      most = c[0].size();
      best = v;
    }
  }
  if (best < names_.size()) {
    const auto& c = critical[best];
    r.critical_variable = names_[best];
    r.to_gradient_ms = Median(c[0]);
    r.to_push_ms = Median(c[1]);
    r.round_trip_ms = Median(c[2]);
    r.loading_ms = Median(c[3]);
  }
  return r;
}

std::string ProfileReport::Describe() const {
  char line[512];
  std::snprintf(line, sizeof line,
                "profile of %d steps (medians): step %.3f ms, compute %.3f ms; first push at "
                "%.3f ms, %.0f%% of pushes sent before compute ended",
                steps, step_ms, compute_ms, first_push_ms, 100 * pushes_before_compute_end);
  std::string out = line;
  if (!critical_variable.empty()) {
    std::snprintf(line, sizeof line,
                  "; critical path through '%s': its gradient at %.3f ms, pushed %.3f ms later, "
                  "answered with its values %.3f ms after that, then %.3f ms of loading",
                  critical_variable.c_str(), to_gradient_ms, to_push_ms, round_trip_ms, loading_ms);
    out += line;
  }
  return out;
}

}  // namespace towerps::worker
