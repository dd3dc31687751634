#include "launch/job_progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace towerps::launch {
namespace {

constexpr std::string_view kPrefix = "@progress ";

int TerminalWidth() {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

std::string Duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

}  // namespace

JobProgress::JobProgress(bool enabled, int64_t examples_per_step)
    : enabled_(enabled), examples_per_step_(examples_per_step) {}

bool JobProgress::Consume(std::string_view line) {
  if (!enabled_ || line.substr(0, kPrefix.size()) != kPrefix) return false;
  const nlohmann::json j = nlohmann::json::parse(line.substr(kPrefix.size()), nullptr, false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
      !j.contains("steps") || !j["steps"].is_number_integer()) {
    return true;
  }
  Report r;
  r.step = j["step"].get<int64_t>();
  r.steps = j["steps"].get<int64_t>();
  r.steps_per_epoch = std::max<int64_t>(1, j.value("steps_per_epoch", int64_t{1}));
  r.loss = j.value("loss", 0.0);
  if (j.contains("accuracy") && j["accuracy"].is_number()) r.accuracy = j["accuracy"].get<double>();
  if (!last_) {
    first_step_ = r.step;
    first_time_ = std::chrono::steady_clock::now();
  }
  last_ = r;
  Draw();
  return true;
}

std::string JobProgress::BarText(std::chrono::steady_clock::time_point now, int width) const {
  if (!last_) return "";
  const Report& r = *last_;
  const int64_t epochs = (r.steps + r.steps_per_epoch - 1) / r.steps_per_epoch;
  const int64_t epoch = std::min(epochs, r.step > 0 ? (r.step - 1) / r.steps_per_epoch + 1 : 1);
  constexpr int kBar = 16;
  const int filled = r.steps > 0 ? static_cast<int>(kBar * std::min(r.step, r.steps) / r.steps) : 0;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBar) bar += '>';
  bar.resize(kBar, ' ');
  char text[256];
  int n = std::snprintf(text, sizeof(text), "epoch %lld/%lld [%s] %lld/%lld",
                        static_cast<long long>(epoch), static_cast<long long>(epochs), bar.c_str(),
                        static_cast<long long>(r.step), static_cast<long long>(r.steps));
  std::string out(text, static_cast<size_t>(std::max(0, n)));
  const double elapsed = std::chrono::duration<double>(now - first_time_).count();
  const int64_t done = r.step - first_step_;
  if (elapsed > 0.2 && done > 0) {
    const double steps_per_sec = static_cast<double>(done) / elapsed;
    const double eps = steps_per_sec * static_cast<double>(examples_per_step_);
    n = eps >= 1e4 ? std::snprintf(text, sizeof(text), " %.1fk ex/s", eps / 1e3)
                   : std::snprintf(text, sizeof(text), " %.0f ex/s", eps);
    out.append(text, static_cast<size_t>(std::max(0, n)));
    out += " ETA " + Duration(static_cast<double>(r.steps - r.step) / steps_per_sec);
  }
  n = std::snprintf(text, sizeof(text), " loss %.4f", r.loss);
  out.append(text, static_cast<size_t>(std::max(0, n)));
  if (r.accuracy) {
    n = std::snprintf(text, sizeof(text), " acc %.4f", *r.accuracy);
    out.append(text, static_cast<size_t>(std::max(0, n)));
  }
  if (width > 1 && out.size() >= static_cast<size_t>(width)) out.resize(width - 1);
  return out;
}

void JobProgress::Draw() {
  if (!enabled_ || !last_) return;
  const std::string text = BarText(std::chrono::steady_clock::now(), TerminalWidth());
  std::fprintf(stdout, "\r\033[K%s", text.c_str());
  std::fflush(stdout);
  drawn_ = true;
}

void JobProgress::Erase() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stdout);
  std::fflush(stdout);
  drawn_ = false;
}

void JobProgress::Print(std::FILE* stream, std::string_view text) {
  Erase();
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
  Draw();
}

void JobProgress::Finish() {
  Erase();
  enabled_ = false;
}

}  // namespace towerps::launch
