// RpcFixture: what the rpc_* fuzz targets call the request handlers against: a fresh
// in-memory registry (no persistence) for the small models of fuzz/small_models.h that the
// target names, and one Metrics for the process.
//
//   fuzz::RpcFixture fx({fuzz::TwoShardModel(PartKind::kSau), fuzz::FuseModel()});  // per input
//   server::SauRequestHandler h(&fx.registry, &fuzz::RpcFixture::metrics(), fuzz::kMaxBatch);
//   fx.Prepare(request.model());   // builds "m" if the request names it
//
// Every input starts from fresh models; a model is built when a request first names it, so
// that an input pays only for the models it uses (an LMU's weight arena alone takes about a
// millisecond to set up and tear down under the sanitizers).
//
// Thread safety: one fixture per thread.
#ifndef STREAMLEARN_FUZZ_RPC_FIXTURE_H_
#define STREAMLEARN_FUZZ_RPC_FIXTURE_H_

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/common/digest.h"
#include "core/shard/model_registry.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/small_models.h"
#include "server/metrics.h"

namespace streamlearn::fuzz {

// Small, so that an oversize batch is within reach of a mutation.
inline constexpr size_t kMaxBatch = 64;

class RpcFixture {
 public:
  explicit RpcFixture(std::vector<ModelSpec> models)
      : registry(Secret()), models_(std::move(models)) {}

  // Shared by every input: series are per (model, shard), and the models are always the same.
  static server::Metrics& metrics() {
    static server::Metrics* const m = new server::Metrics();
    return *m;
  }

  // Builds the fixture's model called `name` unless it is built already or there is none.
  void Prepare(std::string_view name) {
    for (const ModelSpec& spec : models_) {
      if (spec.name != name || registry.Find(name).ok()) continue;
      absl::StatusOr<std::shared_ptr<Model>> m = registry.Create(spec);
      FUZZ_CHECK(m.ok(), m.status().ToString());
    }
  }

  // The state digests of every part of `kind` of the model `name` (none if there is no such
  // model or part): what a refused batch must leave as it was.
  std::vector<Digest> Digests(std::string_view name, PartKind kind) const {
    std::vector<Digest> out;
    absl::StatusOr<std::shared_ptr<Model>> m = registry.Find(name);
    if (!m.ok() || !(*m)->spec().has(kind)) return out;
    for (uint32_t i = 0; i < (*m)->num_shards(); ++i) {
      out.push_back((*m)->part(i, kind)->StateDigest());
    }
    return out;
  }

  ModelRegistry registry;

 private:
  const std::vector<ModelSpec> models_;
};

// The status a stream's ack carries must be the one the handler returned.
template <typename BatchStatus>
void CheckAckStatus(const absl::Status& s, const BatchStatus& in_ack) {
  FUZZ_CHECK(in_ack.code() == static_cast<int>(s.code()) && in_ack.message() == s.message(),
             s.ToString());
}

}  // namespace streamlearn::fuzz

#endif  // STREAMLEARN_FUZZ_RPC_FIXTURE_H_
