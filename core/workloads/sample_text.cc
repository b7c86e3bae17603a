#include "core/workloads/sample_text.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace streamlearn::workloads {

namespace {

template <typename T>
void AppendNumber(T x, std::string* out) {
  char buf[32];  // a double's shortest form is at most 24 characters, a uint64 20
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x);
  assert(ec == std::errc());
  out->append(buf, end);
}

}  // namespace

void AppendSampleLine(SampleTextFormat format, double y, std::span<const lmu::Feature> x,
                      std::string* out) {
  assert(std::isfinite(y));
  AppendNumber(y, out);
  if (format == SampleTextFormat::kVw) out->append(" |");
  for (const lmu::Feature& f : x) {
    assert(std::isfinite(f.val));
    out->push_back(' ');
    AppendNumber(f.id, out);
    out->push_back(':');
    AppendNumber(f.val, out);
  }
  out->push_back('\n');
}

}  // namespace streamlearn::workloads
