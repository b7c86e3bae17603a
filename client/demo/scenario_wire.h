// The worked scenario (scenario.h) on the wire: the ModelSpec that creates its fused model
// through Admin.CreateModel, the check that a model's effective spec is that model, and the
// tally of a Fuse.Learn ack (fuse.proto) into a ScenarioTally. Shared by the demo
// (client/demo/fuse_phase.cc) and tests/server_scenario_test.cc.
//
//   v1::ModelSpec spec = client::ScenarioModelSpec("demo-fuse-1", options);
//   absl::StatusOr<v1::ModelInfo> info = client->CreateModel(spec);
//   ... send a batch of samples, take its ack ...
//   client::TallyAck(ack, batch, &tally);
#ifndef STREAMLEARN_CLIENT_DEMO_SCENARIO_WIRE_H_
#define STREAMLEARN_CLIENT_DEMO_SCENARIO_WIRE_H_

#include <span>
#include <string>

#include "absl/status/status.h"
#include "admin.pb.h"
#include "core/workloads/scenario.h"
#include "core/workloads/scenario_tally.h"
#include "fuse.pb.h"

namespace streamlearn::client {

// A one-shard model named `name` whose fuse part is ScenarioFuseSpec(options); fields left at
// their core defaults are left 0 (the server's "default").
v1::ModelSpec ScenarioModelSpec(const std::string& name, const workloads::ScenarioOptions& options);

// OK iff `info` (GetModel's effective spec) has a fuse part with the pattern, dimensions,
// kernel and LMU sizing of ScenarioFuseSpec(options); FAILED_PRECONDITION naming the first
// field that differs otherwise.
absl::Status CheckScenarioModel(const v1::ModelInfo& info,
                                const workloads::ScenarioOptions& options);

// Counts of control actions in a batch's health ("action:cause" strings).
int CountActions(const v1::FuseHealth& health, std::string_view action_and_cause);

// Adds one OK ack of a batch of scenario samples (`batch[i]` was sent as the ack's prediction
// i; sample t = batch[i].t) to the tally: every prediction, the last sample's clamp
// (health.g_max) and the batch's health (red steps = raise_beta_floor:rj_red actions, alarms =
// restart_eprocess:alarm actions, which name an alarm at the step before).
void TallyAck(const v1::LearnAck& ack, std::span<const workloads::ScenarioSample> batch,
              workloads::ScenarioTally* tally);

}  // namespace streamlearn::client

#endif  // STREAMLEARN_CLIENT_DEMO_SCENARIO_WIRE_H_
