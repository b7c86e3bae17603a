// Spec conversion: the wire ModelSpec (admin.proto) <-> the core streamlearn::ModelSpec.
//
// Proto3 cannot tell an unset field from zero, so a zero numeric field (and an UNSPECIFIED
// enum) means "use the core default": the SauSpec default value is kept, and fields whose core
// default is 0 (tau, c_lo, c_hi, c_rj) are resolved later by sau::ResolveDefaults exactly as
// admin.proto documents. The dimensions d, d_v and r have no default (admin.proto: 1..4096,
// 2..65536), so they are copied as given and a zero is rejected by validation, naming the
// field. FEATURE_KIND_UNSPECIFIED => orthogonal, INPUT_MODE_UNSPECIFIED => L2_SCALED; an unset
// sau.antithetic (proto3 optional) => on when r % 4 == 0, and an unset lmu.max_delta_buckets
// => 4 x delta_buckets (SpecOrigin below).
//
// Parts: a model has an SAU part iff the wire spec has the `sau` message and an LMU part iff
// it has the `lmu` message (message-field presence; an empty message is a part with every
// default). Zero LmuSpec fields keep the lmu::LmuSpec defaults (admin.proto lists them);
// inline_rebuild maps to !background_rebuild. The effective spec goes back out with exactly
// its parts present. A spec with neither part is refused by ValidateModelSpec.
//
// The fuse part (FuseSpec) converts the same way: its sau and lmu messages as above (errors
// name "fuse.sau.<field>", "fuse.lmu.<field>"), except that a zero fuse.sau.d_v takes lmu.m
// (both are the target's dimension m, 1 by default); FUSE_PATTERN values map to
// fuse::FusePattern; zero GateSpec and ControlSpec fields keep the core defaults
// (fuse_spec.h, control_spec.h; g_min and gate.l2, whose defaults are 0, are copied as given).
//
//   absl::StatusOr<ModelSpec> spec = ModelSpecFromProto(request.spec());
//   v1::ModelSpec wire = ModelSpecToProto(model->spec());   // effective spec, all fields set
//
// Conversion does not validate ranges; Model::Create (ValidateModelSpec, sau::ValidateSpec)
// does. It fails only for what the core types cannot hold: enum values this server does not
// know and integers that do not fit.
// Thread safety: plain functions without shared state.
#ifndef STREAMLEARN_SERVER_STORAGE_SPEC_CONVERSION_H_
#define STREAMLEARN_SERVER_STORAGE_SPEC_CONVERSION_H_

#include "absl/status/statusor.h"
#include "admin.pb.h"
#include "core/shard/model_registry.h"

namespace streamlearn::storage {

// Where a wire spec comes from. The two differ only where a default changed after specs were
// stored: an unset sau.antithetic is on when r % 4 == 0 in a request (a client's spec, a
// config file) and off in a stored spec (written before that default; every spec stored
// since sets it); an unset lmu.max_delta_buckets lets a request's delta grow to 4x and a
// stored spec's not at all.
enum class SpecOrigin { kRequest, kStored };

// Errors: INVALID_ARGUMENT naming the field (unknown enum value, integer out of range).
absl::StatusOr<ModelSpec> ModelSpecFromProto(const v1::ModelSpec& wire,
                                             SpecOrigin origin = SpecOrigin::kRequest);

// Every field set from `spec` (normally a resolved spec, so no zero means "default").
v1::ModelSpec ModelSpecToProto(const ModelSpec& spec);

// The wire form of an SAU engine (docs/ENGINES.md).
v1::Engine EngineToProto(sau::Engine engine);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_SPEC_CONVERSION_H_
