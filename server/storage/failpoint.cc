#include "server/storage/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"

namespace streamlearn::storage {
namespace {

struct Armed {
  std::string name;        // empty: no failpoint armed
  uint64_t fire_at = 1;    // the hit that kills
  std::atomic<uint64_t> hits{0};
};

// Parsed once from the environment; a malformed count arms nothing.
Armed& Get() {
  static Armed* armed = [] {
    auto* a = new Armed();
    const char* env = std::getenv("STREAMLEARN_FAILPOINT");
    if (env == nullptr) return a;
    std::string spec(env);
    const size_t at = spec.find('@');
    if (at != std::string::npos) {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(spec.substr(at + 1), &n) || n == 0) return a;
      a->fire_at = n;
      spec.resize(at);
    }
    a->name = spec;
    return a;
  }();
  return *armed;
}

}  // namespace

void Failpoint(std::string_view name) {
  Armed& a = Get();
  if (a.name.empty() || a.name != name) return;
  if (a.hits.fetch_add(1, std::memory_order_relaxed) + 1 == a.fire_at) {
    raise(SIGKILL);
  }
}

}  // namespace streamlearn::storage
