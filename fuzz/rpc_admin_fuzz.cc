// Fuzz target rpc_admin: request validation of the Admin RPCs that take names and specs.
// Each frame (fuzz/rpc_frames.h) is, by op mod 4, a CreateModelRequest, a GetModelRequest, a
// BackupRequest or a ShardMapRequest parsed from its bytes, its model name scoped to the
// frame's caller as AdminService does. A CreateModelRequest's spec goes through what
// Admin.CreateModel and the config file's models go through: storage::ModelSpecFromProto
// (server/storage/spec_conversion.h) and ValidateModelSpec; a valid spec small enough to build
// in a moment is then created in the fixture's registry (fuzz/rpc_fixture.h: "m", 2 SAU
// shards, and "acme/f", fused, are there when named).
//
// Invariants: refusals are INVALID_ARGUMENT (or PERMISSION_DENIED for another tenant's name);
// a spec builds exactly when it is valid (ValidateModelSpec, and sau::ValidateSpec for an SAU
// part; ALREADY_EXISTS for a taken name); the effective spec survives what
// persistence does with it: written as a ModelSpec (ModelSpecToProto) and read back, it is
// valid, builds the same model (same W digest) and writes the same message again; a backup
// name passes only if it follows the name rule.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "admin.pb.h"
#include "core/common/name_rule.h"
#include "core/sau/sau_spec.h"
#include "core/shard/model_registry.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/rpc_fixture.h"
#include "fuzz/rpc_frames.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/auth/gatekeeper.h"
#include "server/storage/spec_conversion.h"

namespace streamlearn::fuzz {
namespace {

void CheckScopeRefusal(const absl::Status& s) {
  FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsPermissionDenied(s), s.ToString());
}

// Small enough to build in well under a millisecond: at most 4 shards of at most 4096
// random-feature weights and 4096 LMU slots each.
bool Small(const ModelSpec& s) {
  const auto sau_small = [](const sau::SauSpec& x) {
    return static_cast<int64_t>(x.r) * std::max(x.d, x.d_v) <= 4096;
  };
  const auto lmu_small = [](const lmu::LmuSpec& x) {
    return static_cast<uint64_t>(x.delta_buckets) * static_cast<uint64_t>(x.bucket_size) <= 4096;
  };
  if (s.shards > 4) return false;
  if (s.has_sau && !sau_small(s.sau)) return false;
  if (s.has_lmu && !lmu_small(s.lmu)) return false;
  if (s.has_fuse && !(sau_small(s.fuse.sau) && lmu_small(s.fuse.lmu))) return false;
  return true;
}

bool SameMessage(const v1::ModelSpec& a, const v1::ModelSpec& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

void CreateModel(RpcFixture& fx, const server::Caller& caller, v1::CreateModelRequest req) {
  if (absl::Status s = caller.Scope(req.mutable_spec()->mutable_name()); !s.ok()) {
    return CheckScopeRefusal(s);
  }
  fx.Prepare(req.spec().name());
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(req.spec());
  if (!spec.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(spec.status()), spec.status().ToString());
    return;
  }
  if (absl::Status s = ValidateModelSpec(*spec); !s.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(s), s.ToString());
    return;
  }
  if (!Small(*spec)) return;
  // ValidateModelSpec leaves an SAU part's spec to sau::ValidateSpec (after its defaults are
  // resolved), which building the model runs; server/config.h checks both up front.
  const absl::Status sau_valid =
      spec->has_sau ? sau::ValidateSpec(sau::ResolveDefaults(spec->sau)) : absl::OkStatus();
  absl::StatusOr<std::shared_ptr<Model>> model = fx.registry.Create(*spec);
  if (!model.ok()) {
    FUZZ_CHECK(absl::IsAlreadyExists(model.status()) ||
                   (!sau_valid.ok() && model.status() == sau_valid),
               absl::StrCat("a valid spec does not build: ", model.status().ToString()));
    return;
  }
  FUZZ_CHECK(sau_valid.ok(), absl::StrCat("built an invalid spec: ", sau_valid.ToString()));
  // Persistence writes the effective spec and builds the model from it again at start-up.
  const v1::ModelSpec stored = storage::ModelSpecToProto((*model)->spec());
  absl::StatusOr<ModelSpec> read = storage::ModelSpecFromProto(stored);
  FUZZ_CHECK(read.ok(), read.status().ToString());
  FUZZ_CHECK(ValidateModelSpec(*read).ok(), ValidateModelSpec(*read).ToString());
  absl::StatusOr<std::shared_ptr<Model>> again = Model::Create(*read, fx.registry.secret());
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK((*again)->w_digest() == (*model)->w_digest(), stored.DebugString());
  FUZZ_CHECK(SameMessage(storage::ModelSpecToProto((*again)->spec()), stored),
             stored.DebugString());
}

void GetModel(RpcFixture& fx, const server::Caller& caller, const v1::GetModelRequest& in) {
  std::string name = in.name();
  if (absl::Status s = caller.Scope(&name); !s.ok()) return CheckScopeRefusal(s);
  fx.Prepare(name);
  absl::StatusOr<std::shared_ptr<Model>> m = fx.registry.Find(name);
  if (m.ok()) {
    FUZZ_CHECK((*m)->spec().name == name, name);
    FUZZ_CHECK(caller.Sees(name), name);
  } else {
    FUZZ_CHECK(absl::IsNotFound(m.status()), m.status().ToString());
  }
}

// The name rule, written out again: 1..64 of [A-Za-z0-9_.-], not "." or "..".
bool FollowsNameRule(std::string_view name) {
  if (name.empty() || name.size() > kNameMaxBytes || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
  });
}

void Backup(const v1::BackupRequest& in) {
  const absl::Status s = CheckName("backup", in.name());
  FUZZ_CHECK(s.ok() == FollowsNameRule(in.name()), s.ToString());
  if (!s.ok()) FUZZ_CHECK(absl::IsInvalidArgument(s), s.ToString());
}

void ShardMap(RpcFixture& fx, const server::Caller& caller, const v1::ShardMapRequest& in) {
  std::string want = in.model();
  if (want.empty()) return;
  if (absl::Status s = caller.Scope(&want); !s.ok()) return CheckScopeRefusal(s);
  FUZZ_CHECK(CheckScopedModelName(want).ok(), want);
  FUZZ_CHECK(caller.Sees(want), want);
  (void)fx.registry.Find(want);
}

template <typename Message>
bool Parse(std::string_view bytes, Message* m) {
  return m->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

void Run(std::string_view input) {
  RpcFixture fx({TwoShardModel(PartKind::kSau), FuseModel()});
  for (const RpcFrame& f : SplitFrames(input)) {
    const server::Caller caller = CallerOf(f.caller);
    switch (f.op % 4) {
      case 0: {
        v1::CreateModelRequest req;
        if (Parse(f.message, &req)) CreateModel(fx, caller, std::move(req));
        break;
      }
      case 1: {
        v1::GetModelRequest req;
        if (Parse(f.message, &req)) GetModel(fx, caller, req);
        break;
      }
      case 2: {
        v1::BackupRequest req;
        if (Parse(f.message, &req)) Backup(req);
        break;
      }
      default: {
        v1::ShardMapRequest req;
        if (Parse(f.message, &req)) ShardMap(fx, caller, req);
        break;
      }
    }
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
