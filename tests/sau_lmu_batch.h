// One SAU batch and one LMU batch for the same routing key and the same t's, drawn from a
// test's seeded Inputs, as requests for the server and as views for an in-process reference
// model (the cluster tests apply every acknowledged batch once, in order, to the reference and
// compare state digests).
//
//   test_util::SauLmuBatch b(inputs, key, &t[shard], {.events = 4, .d = 4, .d_v = 2});
//   session->Send(b.ingest);          // or a raw stream
//   ASSERT_TRUE(b.ApplyTo(**reference, shard).ok());
#ifndef STREAMLEARN_TESTS_SAU_LMU_BATCH_H_
#define STREAMLEARN_TESTS_SAU_LMU_BATCH_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/shard/model_registry.h"
#include "lmu.pb.h"
#include "sau.pb.h"
#include "tests/test_server.h"

namespace streamlearn::test_util {

struct SauLmuBatchShape {
  int events = 4;    // per batch (SAU events = LMU samples)
  int d = 4;         // k
  int d_v = 2;       // v
  int features = 3;  // LMU features per sample, ids in [1, 50]
};

class SauLmuBatch {
 public:
  // Advances *t by shape.events (the batch's t's are *t + 1 ..).
  SauLmuBatch(Inputs& inputs, const std::string& routing_key, uint64_t* t,
              SauLmuBatchShape shape) {
    ingest.set_routing_key(routing_key);
    update.set_routing_key(routing_key);
    for (int e = 0; e < shape.events; ++e) {
      const uint64_t te = ++*t;
      ts_.push_back(te);
      v1::Event* ev = ingest.add_events();
      ev->set_t(te);
      ks_.push_back(inputs.Vector(shape.d));
      vs_.push_back(inputs.Vector(shape.d_v));
      for (double x : ks_.back()) ev->add_k(x);
      for (double x : vs_.back()) ev->add_v(x);
      v1::Sample* s = update.add_samples();
      s->set_t(te);
      xs_.emplace_back();
      for (int f = 0; f < shape.features; ++f) {
        // |u| * 1e6: a negative double cast to uint64_t is undefined (clang's UBSan).
        const uint64_t id = 1 + static_cast<uint64_t>(std::fabs(inputs.Next()) * 1e6) % 50;
        const double val = inputs.Next();
        s->add_ids(id);
        s->add_vals(val);
        xs_.back().push_back({.id = id, .val = val});
      }
      ys_.push_back({inputs.Next()});
      s->add_y(ys_.back()[0]);
    }
  }

  // Applies both batches to shard `shard` of the reference.
  absl::Status ApplyTo(Model& reference, uint32_t shard) const {
    std::vector<EventView> events;
    std::vector<SampleView> samples;
    for (size_t e = 0; e < ts_.size(); ++e) {
      events.push_back({.t = ts_[e], .k = ks_[e], .v = vs_[e]});
      samples.push_back({.t = ts_[e], .x = xs_[e], .y = ys_[e]});
    }
    absl::Status s = reference.sau(shard).Ingest(events, 1024, nullptr).status();
    if (!s.ok()) return s;
    return reference.lmu(shard).Update(samples, 1024, nullptr).status();
  }

  v1::IngestRequest ingest;
  v1::UpdateRequest update;

 private:
  std::vector<uint64_t> ts_;
  std::vector<std::vector<double>> ks_, vs_, ys_;
  std::vector<std::vector<lmu::Feature>> xs_;
};

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_SAU_LMU_BATCH_H_
