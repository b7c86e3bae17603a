// The demo's LMU phase: trains an LMU-only model on a synthetic sparse linear stream and shows,
// as it goes, the prequential error falling, the background rebuilds publishing new bases, and
// the delta's probes staying within their bounds (docs/CLIENT.md, "The demo").
#ifndef STREAMLEARN_CLIENT_DEMO_LMU_PHASE_H_
#define STREAMLEARN_CLIENT_DEMO_LMU_PHASE_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/lib/client.h"

namespace streamlearn::demo {

struct LmuPhaseOptions {
  std::string model;            // created (LMU part only), or reused
  std::string routing_key;
  uint64_t samples = 30000;
  uint64_t seed = 1;
  bool quiet = false;
};

absl::Status RunLmuPhase(Client& client, const LmuPhaseOptions& options, std::ostream& out);

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_LMU_PHASE_H_
