// Small models for the fuzz targets and their seeds (README.md, "Fuzzing"): specs that
// are valid, cheap to build (a few KiB of state) and reach the interesting paths within a few
// dozen items (the e-process's warm-up and epochs, LMU rebuilds). The snapshot and log-entry
// seeds (fuzz/make_seeds.cc) are made with these specs, so the targets restore and replay them
// against the same ones.
//
//   ModelRegistry registry(fuzz::Secret());
//   auto model = registry.Create(fuzz::TwoShardModel(PartKind::kSau));   // "m": 2 SAU shards
//
// Thread safety: plain functions.
#ifndef STREAMLEARN_FUZZ_SMALL_MODELS_H_
#define STREAMLEARN_FUZZ_SMALL_MODELS_H_

#include "core/fuse/fuse_spec.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_spec.h"
#include "core/sau/sau_spec.h"
#include "core/shard/model_registry.h"

namespace streamlearn::fuzz {

// d = 2, d_v = 2, r = 8, r_v = 1 (so the low-rank readout exists), warm-up 4, epochs of 16.
sau::SauSpec SmallSau();
// The ridge (filter K = 1, so M is kept too) and vla (a refresh every 3 writes) engines at
// d = 2, d_v = 2 (docs/ENGINES.md). REQUIRES: engine is kRidge or kVla.
sau::SauSpec SmallEngine(sau::Engine engine);
// m = 2, C = 16 x 4 = 64 slots (a rebuild after a few dozen new ids), inline rebuilds.
lmu::LmuSpec SmallLmu();
// Meta-linear; its SAU d = 2, d_v = 1, r = 8; its LMU m = 1, C = 64, inline rebuilds.
fuse::FuseSpec SmallFuse();
// A fixed hash secret.
lmu::HashSecret Secret();

// Model "m": 2 shards of an SAU (SmallSau) or of an LMU (SmallLmu). REQUIRES: kind is kSau or
// kLmu.
ModelSpec TwoShardModel(PartKind kind);
// Model "acme/f": a fused learner (SmallFuse), 1 shard, in tenant "acme"'s scope.
ModelSpec FuseModel();
// One shard of the part `kind` alone, with the small spec above (named "p"): what the snapshot
// and log-entry targets restore and replay against.
ModelSpec PartModel(PartKind kind);
// PartModel(kind) as a server keeps it: the spec of the model Model::Create built from it
// (defaults resolved), which restores and replays take. Built once.
const ModelSpec& ResolvedPartModel(PartKind kind);

}  // namespace streamlearn::fuzz

#endif  // STREAMLEARN_FUZZ_SMALL_MODELS_H_
