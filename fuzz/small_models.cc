#include "fuzz/small_models.h"

#include <cstdlib>
#include <memory>

namespace streamlearn::fuzz {

sau::SauSpec SmallSau() {
  sau::SauSpec s;
  s.d = 2;
  s.d_v = 2;
  s.r = 8;
  s.r_v = 1;
  s.seed = 7;
  s.warmup = 4;
  s.epoch_length = 16;
  return s;
}

lmu::LmuSpec SmallLmu() {
  lmu::LmuSpec s;
  s.m = 2;
  s.delta_buckets = 16;
  s.lambda_max = 0;
  s.margin = 0;
  s.background_rebuild = false;
  return s;
}

fuse::FuseSpec SmallFuse() {
  fuse::FuseSpec s;
  s.sau.d = 2;
  s.sau.d_v = 1;
  s.sau.r = 8;
  s.sau.seed = 11;
  s.sau.warmup = 4;
  s.sau.epoch_length = 16;
  s.lmu.m = 1;
  s.lmu.delta_buckets = 16;
  s.lmu.lambda_max = 0;
  s.lmu.margin = 0;
  s.lmu.background_rebuild = false;
  return s;
}

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(7 * i + 3);
  return s;
}

ModelSpec TwoShardModel(PartKind kind) {
  ModelSpec m;
  m.name = "m";
  m.shards = 2;
  m.has_sau = kind == PartKind::kSau;
  m.sau = SmallSau();
  m.has_lmu = kind == PartKind::kLmu;
  m.lmu = SmallLmu();
  return m;
}

ModelSpec FuseModel() {
  ModelSpec m;
  m.name = "acme/f";
  m.shards = 1;
  m.has_sau = false;
  m.has_fuse = true;
  m.fuse = SmallFuse();
  return m;
}

ModelSpec PartModel(PartKind kind) {
  ModelSpec m;
  m.name = "p";
  m.shards = 1;
  m.has_sau = kind == PartKind::kSau;
  m.sau = SmallSau();
  m.has_lmu = kind == PartKind::kLmu;
  m.lmu = SmallLmu();
  m.has_fuse = kind == PartKind::kFuse;
  m.fuse = SmallFuse();
  return m;
}

sau::SauSpec SmallEngine(sau::Engine engine) {
  sau::SauSpec s;
  s.engine = engine;
  s.d = 2;
  s.d_v = 2;
  s.ridge_engine.gamma = 0.9;
  s.ridge_engine.filter_order = 1;
  s.vla_engine.refresh_period = 3;
  return s;
}

const ModelSpec& ResolvedPartModel(PartKind kind) {
  static const ModelSpec* const specs = [] {
    auto* out = new ModelSpec[std::size(kPartKinds)];
    for (PartKind k : kPartKinds) {
      absl::StatusOr<std::shared_ptr<Model>> m = Model::Create(PartModel(k), Secret());
      if (!m.ok()) std::abort();  // the small specs are valid
      out[static_cast<int>(k) - 1] = (*m)->spec();
    }
    return out;
  }();
  return specs[static_cast<int>(kind) - 1];
}

}  // namespace streamlearn::fuzz
