#include "client/cli/progress.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string Rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

}  // namespace

ProgressBar::ProgressBar(bool enabled, std::optional<uint64_t> total_bytes, std::string unit)
    : enabled_(enabled),
      total_bytes_(total_bytes),
      unit_(std::move(unit)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::Draw(uint64_t bytes, uint64_t items, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? items / seconds : 0.0;
  std::string line;
  if (total_bytes_ && *total_bytes_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(bytes) / *total_bytes_);
    const int filled = static_cast<int>(frac * kBarWidth);
    line = fmt::format("[{}{}] {:5.1f}%  ", std::string(filled, '#'),
                       std::string(kBarWidth - filled, ' '), frac * 100.0);
  }
  line += fmt::format("{} {}  {}/s", items, unit_, Rate(rate));
  std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\x1b[K");
  std::fflush(stderr);
}

}  // namespace streamlearn::cli
