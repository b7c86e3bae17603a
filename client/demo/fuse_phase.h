// The demo's Fuse phase: the worked scenario of docs/FUSE.md (core/workloads/scenario.h)
// against a fused model (linear-as-gate) over the Fuse.Learn stream. It prints a live table
// (the gate, its clamp, the margin, RJ, beta_floor, lambda_*, the LMU's ring and delta load,
// the round-trip latency of the Learn batches) and per phase the fused error beside the SAU's
// and the LMU's alone (docs/CLIENT.md, "The demo").
//
// Every run creates a new model, <prefix>-<n> with n one more than the highest run already
// on the server: the scenario is a story from a fresh learner (steady, then the spike, then
// recovery), so a second run shows the same figures instead of continuing a learner that has
// already been through the drift. Earlier runs stay on the server for the CLI.
#ifndef STREAMLEARN_CLIENT_DEMO_FUSE_PHASE_H_
#define STREAMLEARN_CLIENT_DEMO_FUSE_PHASE_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/lib/client.h"

namespace streamlearn::demo {

struct FusePhaseOptions {
  std::string model_prefix;   // the model is <model_prefix>-<run>
  std::string routing_key;
  uint64_t seed = 2;          // the scenario's RNG seed (ScenarioOptions::seed)
  uint32_t batch = 25;        // samples per Fuse.Learn request
  uint64_t every = 250;       // samples between table rows
  bool quiet = false;         // only the per-phase summaries
};

absl::Status RunFusePhase(Client& client, const FusePhaseOptions& options, std::ostream& out);

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_FUSE_PHASE_H_
