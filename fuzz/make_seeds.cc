// make_seeds: writes the binary seeds of the fuzz corpora (and the audit chain's lines), made
// by the code that makes the real thing, with the small models of fuzz/small_models.h:
// log entries (storage's encoders), snapshots of shard parts and of their estimators,
// manifests, audit chain lines (AuditLogWriter with fuzz/audit_fixture.h's key) and request
// streams for the rpc_* targets (fuzz/rpc_frames.h). Run it after a format changes:
//
//   build-fuzz/fuzz/make_seeds fuzz/corpus      # rewrites <target>/gen-* in each corpus
//
// The output is deterministic: the same tree writes the same bytes.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "admin.pb.h"
#include "core/audit/checkpoint.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/step_records.h"
#include "core/sau/counter_rng.h"
#include "core/sau/sau_estimator.h"
#include "core/audit/tree_head.h"
#include "core/audit/verifier.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"
#include "fuse.pb.h"
#include "fuzz/audit_fixture.h"
#include "fuzz/rpc_frames.h"
#include "fuzz/small_models.h"
#include "lmu.pb.h"
#include "sau.pb.h"
#include "server/storage/log_entry.h"
#include "server/storage/manifest.h"
#include "server/storage/part_codec.h"

namespace streamlearn::fuzz {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "make_seeds: %s\n", what.c_str());
  std::exit(1);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

class SeedWriter {
 public:
  explicit SeedWriter(fs::path root) : root_(std::move(root)) {}
  void Write(const std::string& target, const std::string& name, std::string_view bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / ("gen-" + name), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) Die("cannot write " + (dir / name).string());
    ++written_;
  }
  int written() const { return written_; }

 private:
  fs::path root_;
  int written_ = 0;
};

// t = 1, 2, ...: event i has k = (sin i, cos i), v = (i/10, -i/10).
struct SauBatch {
  std::vector<std::vector<double>> k, v;
  std::vector<EventView> views;
  SauBatch(uint64_t first_t, int n, bool repeat_last_t) {
    for (int i = 0; i < n; ++i) {
      k.push_back({std::sin(i + 1.0), std::cos(i + 1.0)});
      v.push_back({(i + 1) / 10.0, -(i + 1) / 10.0});
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t t = repeat_last_t && i == n - 1 ? first_t + i - 1 : first_t + i;
      views.push_back(EventView{.t = t, .k = k[i], .v = v[i]});
    }
  }
};

// Sample i: 1-3 features over ids first_id + i..; y has m values.
struct LmuBatch {
  std::vector<std::vector<lmu::Feature>> x;
  std::vector<std::vector<double>> y;
  std::vector<SampleView> views;
  LmuBatch(uint64_t first_t, int n, uint64_t first_id, int m) {
    for (int i = 0; i < n; ++i) {
      std::vector<lmu::Feature> xi;
      for (int j = 0; j <= i % 3; ++j) xi.push_back({.id = first_id + i + 7 * j, .val = 1.0 - j});
      x.push_back(xi);
      y.push_back(std::vector<double>(m, (i % 5) / 4.0));
    }
    for (int i = 0; i < n; ++i) views.push_back(SampleView{.t = first_t + i, .x = x[i], .y = y[i]});
    if (n > 1) views[1].lr = 0.1;  // an override, as the wire allows
  }
};

struct FuseBatch {
  std::vector<std::vector<lmu::Feature>> x;
  std::vector<std::vector<double>> q, y;
  std::vector<FuseSampleView> views;
  FuseBatch(uint64_t first_t, int n) {
    for (int i = 0; i < n; ++i) {
      x.push_back({{.id = 100u + i % 7, .val = 1.0}, {.id = 3, .val = 0.5}});
      q.push_back({std::sin(i * 0.7), std::cos(i * 0.7)});
      y.push_back({0.25 * (i % 4)});
    }
    for (int i = 0; i < n; ++i) {
      views.push_back(FuseSampleView{.t = first_t + i, .x = x[i], .q = q[i], .y = y[i]});
    }
  }
};

void LogEntries(SeedWriter& w) {
  std::string bytes;
  SauBatch sau(1, 3, /*repeat_last_t=*/true);
  storage::EncodeSauEntry(sau.views, &bytes);
  w.Write("log_entry", "sau-3-events", bytes);
  w.Write("log_entry", "sau-truncated", std::string_view(bytes).substr(0, bytes.size() - 5));
  SauBatch wide(1, 1, false);
  wide.k[0].push_back(0.5);  // d = 3: the model refuses it
  wide.views[0].k = wide.k[0];
  storage::EncodeSauEntry(wide.views, &bytes);
  w.Write("log_entry", "sau-wrong-dimension", bytes);
  LmuBatch lmu(1, 4, 10, 2);
  storage::EncodeLmuEntry(lmu.views, &bytes);
  w.Write("log_entry", "lmu-4-samples", bytes);
  storage::EncodeLmuEntryLayout1(lmu.views, &bytes);  // what earlier servers wrote
  w.Write("log_entry", "lmu-4-samples-layout1", bytes);
  FuseBatch fuse(1, 3);
  storage::EncodeFuseEntry(fuse.views, &bytes);
  w.Write("log_entry", "fuse-3-samples", bytes);
}

// A shard part's snapshot, and each snapshot nested in it (its estimators').
void WriteSnapshot(SeedWriter& w, const std::string& name, const std::string& blob) {
  w.Write("snapshot", name, blob);
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(blob);
  Check(c.status(), "open a snapshot");
  int nested = 0;
  for (const auto& [tag, payload] : c->sections()) {
    if (payload.substr(0, kSnapshotMagic.size()) != kSnapshotMagic) continue;
    WriteSnapshot(w, name + "-" + std::to_string(nested++), std::string(payload));
  }
}

void Snapshots(SeedWriter& w) {
  {
    auto part = storage::PartCodec<SauShard>::Fresh(ResolvedPartModel(PartKind::kSau), Secret());
    Check(part.status(), "sau part");
    WriteSnapshot(w, "sau-fresh", (*part)->Snapshot().blob);
    SauBatch b(1, 24, false);  // past the warm-up, into the first epoch
    Check((*part)->Ingest(b.views, BatchLimits(64)).status(), "sau ingest");
    WriteSnapshot(w, "sau-24-events", (*part)->Snapshot().blob);
  }
  for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
    absl::StatusOr<sau::Memory> mem = sau::Memory::Create(SmallEngine(engine));
    Check(mem.status(), "engine memory");
    SauShard part(*mem);
    SauBatch b(1, 9, false);
    Check(part.Ingest(b.views, BatchLimits(64)).status(), "engine ingest");
    WriteSnapshot(w, std::string(sau::EngineName(engine)) + "-9-events", part.Snapshot().blob);
  }
  {
    auto part = storage::PartCodec<LmuShard>::Fresh(ResolvedPartModel(PartKind::kLmu), Secret());
    Check(part.status(), "lmu part");
    LmuBatch b(1, 40, 1000, 2);  // 80 ids in a 64-slot delta: a rebuild, then a base
    Check((*part)->Update(b.views, BatchLimits(64)).status(), "lmu update");
    absl::StatusOr<PartSnapshot> s = (*part)->TakeSnapshot();
    Check(s.status(), "lmu snapshot");
    WriteSnapshot(w, "lmu-40-samples", s->blob);
  }
  {
    auto part =
        storage::PartCodec<FuseShard>::Fresh(ResolvedPartModel(PartKind::kFuse), Secret());
    Check(part.status(), "fuse part");
    FuseBatch b(1, 12);
    Check((*part)->Learn(b.views, BatchLimits(64)).status(), "fuse learn");
    absl::StatusOr<PartSnapshot> s = (*part)->TakeSnapshot();
    Check(s.status(), "fuse snapshot");
    WriteSnapshot(w, "fuse-12-samples", s->blob);
  }
}

void Manifests(SeedWriter& w) {
  std::vector<storage::ManifestEntry> entries;
  w.Write("manifest", "empty", storage::EncodeManifest(entries));
  for (uint64_t i = 1; i <= 2; ++i) {
    storage::ManifestEntry e;
    e.snapshot_seq = i;
    e.log_seq = 10 * i;
    e.blob_digest = Sha256Of("blob" + std::to_string(i));
    e.audit_index = 3 * i;
    e.audit_head = Sha256Of("head" + std::to_string(i));
    entries.insert(entries.begin(), e);  // newest first
    w.Write("manifest", std::to_string(i) + "-entries", storage::EncodeManifest(entries));
  }
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out.append(l).push_back('\n');
  return out;
}

AuditRecord Body(std::string_view json) {
  absl::StatusOr<AuditRecord> r = ParseAuditJson(json);
  Check(r.status(), "an audit body");
  return *std::move(r);
}

void AuditLines(SeedWriter& w) {
  AuditLogWriter writer(AuditKey(), kCheckpointEvery);
  std::vector<std::string> lines;
  const ChainId id = AuditChain();
  // A spec with no part: the records below are written by hand for the stream rules, and the
  // rules recomputed from a spec's parts are exercised by chain-estimator.jsonl.
  Check(writer.Append(GenesisBody("{\"name\":\"m\"}", Sha256Of("W"), &id), &lines), "genesis");
  // One record for each of the verifier's body rules: margin and the alarm's action, the RJ
  // window, the LMU probe bounds, a certificate in a client's append.
  for (std::string_view body : {
           R"({"kind":"sau_event","margin":0.5,"rj_exceeded":false,"rj_level":"green","t":1})",
           R"({"kind":"sau_event","margin":-0.25,"rj_exceeded":true,"rj_level":"green","t":2})",
           R"({"actions":[{"action":"raise_beta_floor","cause":"alarm"}],)"
           R"("kind":"sau_control","t":2})",
           R"({"c_insert_p100":2,"c_lookup_p100":1,"insert_bound":8,"kind":"lmu_update",)"
           R"("locate_bound":4})",
           R"({"kind":"append","payload":{"certificate":{"c":[1.0],"d":1.5,"epsilon":0.5,)"
           R"("eta_c":0.0,"eta_d":0.0,"kappa":1.0,"rows":[{"a":[1.0],"alpha":1.0,"b":0.5}]}}})",
       }) {
    Check(writer.Append(Body(body), &lines), "a record");
  }
  w.Write("audit_line", "chain.jsonl", Join(lines));
  std::vector<std::string> cut(lines.begin(), lines.begin() + 3);
  w.Write("audit_line", "chain-prefix.jsonl", Join(cut));
  std::vector<std::string> swapped = lines;
  std::swap(swapped[1], swapped[2]);
  w.Write("audit_line", "chain-swapped.jsonl", Join(swapped));

  // A real estimator's records past its warm-up (the rules recomputed from the genesis spec:
  // threshold, margin, epoch, floor; docs/AUDIT.md), an alarm's control record when one falls.
  sau::SauSpec spec;
  spec.d = 2;
  spec.d_v = 1;
  spec.r = 8;
  spec.input_scale = 4;
  absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(spec);
  Check(est.status(), "an estimator");
  const sau::SauSpec& eff = est->spec();
  char model_spec[512];
  std::snprintf(model_spec, sizeof(model_spec),
                R"({"sau":{"alpha":%.17g,"beta_floor":%.17g,"c_rj":%.17g,"r":%d,)"
                R"("rj_delta":%.17g}})",
                eff.alpha, eff.beta_floor, eff.c_rj, eff.r, eff.rj_delta);
  AuditLogWriter est_writer(AuditKey(), kCheckpointEvery);
  lines.clear();
  Check(est_writer.Append(GenesisBody(model_spec, Sha256Of("W"), &id), &lines), "genesis");
  sau::CounterRng rng(7, 0x5eed);
  for (int i = 0; i < 230; ++i) {
    const double k[2] = {rng.NextNormal() + (i > 210 ? 3.0 : 0.0), rng.NextNormal()};
    const double v[1] = {rng.NextNormal()};
    const sau::EventDiagnostics d = est->Ingest(k, v);
    std::string body;
    AppendSauEventBody({.t = static_cast<uint64_t>(i + 1), .log_seq = static_cast<uint64_t>(i + 1),
                        .ver_sau = static_cast<uint64_t>(i + 1), .diag = &d},
                       &body);
    Check(est_writer.AppendCanonical(body, &lines), "an event");
    if (d.alarm) {
      body.clear();
      AppendSauAlarmBody(i + 1, i + 1, d, &body);
      Check(est_writer.AppendCanonical(body, &lines), "an alarm");
    }
  }
  // The honest chain passes every rule (the fuzzer then starts from a verifying chain).
  AuditVerifier verifier({.public_key = &AuditKey().PublicKey(),
                          .checkpoint_every = kCheckpointEvery, .chain = id});
  for (const std::string& line : lines) Check(verifier.Feed(line), "the estimator's chain");
  Check(verifier.Finish(), "the estimator's chain");
  w.Write("audit_line", "chain-estimator.jsonl", Join(lines));
}

// Signed tree heads of a small chain by the fixture's key: alone, with a witness's cosignature
// line, and one of the empty tree.
void TreeHeads(SeedWriter& w) {
  std::vector<std::string> leaves = {"genesis", "event 1", "event 2", "checkpoint", "event 3"};
  MerkleTreeCache tree([&](uint64_t begin, uint64_t end,
                           const std::function<void(uint64_t, std::string_view)>& visit) {
    for (uint64_t i = begin; i < end; ++i) visit(i, leaves[i]);
    return absl::OkStatus();
  });
  const TreeHead head{TreeHeadOrigin("m", 0), leaves.size(), *tree.Root(leaves.size())};
  absl::StatusOr<std::string> note = SignTreeHead(AuditKey(), head);
  Check(note.status(), "a tree head");
  w.Write("tree_head", "signed.note", *note);
  w.Write("tree_head", "cosigned.note",
          *note + "\xe2\x80\x94 witness AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n");
  absl::StatusOr<std::string> empty =
      SignTreeHead(AuditKey(), TreeHead{TreeHeadOrigin("tenant/m", 3), 0, EmptyTreeHash()});
  Check(empty.status(), "an empty tree head");
  w.Write("tree_head", "empty.note", *empty);
}

template <typename Message>
std::string Bytes(const Message& m) {
  std::string out;
  if (!m.SerializeToString(&out)) Die("serialize");
  return out;
}

void SauRequests(SeedWriter& w) {
  v1::IngestRequest ingest;
  ingest.set_model("m");
  ingest.set_routing_key("user-1");
  for (int i = 1; i <= 3; ++i) {
    v1::Event* e = ingest.add_events();
    e->set_t(i);
    e->add_k(std::sin(i)), e->add_k(std::cos(i));
    e->add_v(i), e->add_v(-i);
  }
  v1::QueryRequest query;
  query.set_model("m");
  query.set_routing_key("user-1");
  query.add_q(0.5), query.add_q(-0.5);
  query.set_low_rank(true);
  std::string in;
  AppendFrame(0, 0, Bytes(ingest), &in);
  AppendFrame(1, 0, Bytes(query), &in);
  AppendFrame(0, 1, Bytes(ingest), &in);  // the default tenant, again: every t a duplicate
  w.Write("rpc_sau", "ingest-query", in);
  in.clear();
  ingest.mutable_events(1)->add_k(1.0);  // a key of d = 3
  AppendFrame(0, 2, Bytes(ingest), &in);  // tenant acme: "acme/m" does not exist
  AppendFrame(0, 0, Bytes(ingest), &in);
  query.set_path(v1::READOUT_PATH_CORRECTNESS);
  AppendFrame(1, 3, Bytes(query), &in);
  w.Write("rpc_sau", "refusals", in);
}

void LmuRequests(SeedWriter& w) {
  v1::UpdateRequest update;
  update.set_model("m");
  update.set_routing_key("user-2");
  for (int i = 1; i <= 3; ++i) {
    v1::Sample* s = update.add_samples();
    s->set_t(i);
    s->add_ids(17 + i), s->add_vals(1.0);
    s->add_ids(3), s->add_vals(0.5);
    s->add_y(0.25 * i), s->add_y(-0.25 * i);
    if (i == 2) s->set_lr(0.1);
  }
  v1::PredictRequest predict;
  predict.set_model("m");
  predict.set_routing_key("user-2");
  predict.add_ids(18), predict.add_vals(1.0);
  std::string in;
  AppendFrame(0, 0, Bytes(update), &in);
  AppendFrame(1, 1, Bytes(predict), &in);
  w.Write("rpc_lmu", "update-predict", in);
  in.clear();
  update.mutable_samples(0)->add_vals(2.0);  // ids and vals of different lengths
  AppendFrame(0, 0, Bytes(update), &in);
  update.set_model("acme/f");  // a model without an LMU part
  AppendFrame(0, 3, Bytes(update), &in);
  w.Write("rpc_lmu", "refusals", in);

  // The same kind of batch in columns (lmu.proto SampleColumns): values all 1.0 (none
  // sent), then with values and a per-sample lr; then columns that do not fit together.
  v1::UpdateRequest columns;
  columns.set_model("m");
  columns.set_routing_key("user-2");
  v1::SampleColumns* c = columns.mutable_columns();
  for (int i = 1; i <= 3; ++i) {
    c->add_t(10 + i);
    c->add_counts(2);
    c->add_ids(17 + i), c->add_ids(3);
    c->add_y(0.25 * i), c->add_y(-0.25 * i);
  }
  in.clear();
  AppendFrame(0, 0, Bytes(columns), &in);
  for (int i = 0; i < 6; ++i) c->add_vals(0.5 * i);
  for (int i = 0; i < 3; ++i) c->set_t(i, 20 + i), c->add_lr(i == 1 ? 0.1 : std::nan(""));
  AppendFrame(0, 0, Bytes(columns), &in);
  w.Write("rpc_lmu", "columns", in);
  in.clear();
  c->add_counts(1);  // a count too many
  AppendFrame(0, 0, Bytes(columns), &in);
  c->mutable_counts()->RemoveLast();
  c->mutable_y()->RemoveLast();  // a target short
  AppendFrame(0, 0, Bytes(columns), &in);
  *columns.add_samples() = update.samples(1);  // samples and columns
  AppendFrame(0, 0, Bytes(columns), &in);
  w.Write("rpc_lmu", "column-refusals", in);
}

void FuseRequests(SeedWriter& w) {
  v1::LearnRequest learn;
  learn.set_model("f");  // tenant acme's caller names it plainly
  learn.set_routing_key("user-3");
  for (int i = 1; i <= 6; ++i) {
    v1::FuseSample* s = learn.add_samples();
    s->set_t(i);
    s->add_ids(100 + i % 3), s->add_vals(1.0);
    s->add_q(std::sin(i)), s->add_q(std::cos(i));
    s->add_y(0.5 * (i % 2));
  }
  v1::FusePredictRequest predict;
  predict.set_model("acme/f");
  predict.add_ids(101), predict.add_vals(1.0);
  predict.add_q(0.5), predict.add_q(0.5);
  std::string in;
  AppendFrame(0, 2, Bytes(learn), &in);
  AppendFrame(1, 0, Bytes(predict), &in);
  w.Write("rpc_fuse", "learn-predict", in);
  in.clear();
  learn.mutable_samples(0)->add_ids(~uint64_t{0});  // a reserved id
  learn.mutable_samples(0)->add_vals(1.0);
  AppendFrame(0, 2, Bytes(learn), &in);
  AppendFrame(0, 1, Bytes(learn), &in);  // the default tenant: "f" does not exist
  w.Write("rpc_fuse", "refusals", in);
}

void AdminRequests(SeedWriter& w) {
  v1::CreateModelRequest sau;
  sau.mutable_spec()->set_name("n1");
  sau.mutable_spec()->set_shards(2);
  sau.mutable_spec()->mutable_sau()->set_d(2);
  sau.mutable_spec()->mutable_sau()->set_d_v(2);
  sau.mutable_spec()->mutable_sau()->set_r(8);
  v1::CreateModelRequest lmu;
  lmu.mutable_spec()->set_name("n2");
  lmu.mutable_spec()->mutable_lmu()->set_m(2);
  lmu.mutable_spec()->mutable_lmu()->set_delta_buckets(16);
  lmu.mutable_spec()->mutable_lmu()->set_margin(1);
  lmu.mutable_spec()->mutable_lmu()->set_lambda_max(1);
  v1::CreateModelRequest fuse;
  fuse.mutable_spec()->set_name("n3");
  fuse.mutable_spec()->mutable_fuse()->mutable_sau()->set_d(2);
  fuse.mutable_spec()->mutable_fuse()->mutable_sau()->set_r(8);
  fuse.mutable_spec()->mutable_fuse()->mutable_lmu()->set_delta_buckets(16);
  fuse.mutable_spec()->mutable_fuse()->mutable_lmu()->set_margin(1);
  fuse.mutable_spec()->mutable_fuse()->mutable_lmu()->set_lambda_max(1);
  fuse.mutable_spec()->mutable_fuse()->set_pattern(v1::FUSE_PATTERN_LINEAR_AS_GATE);
  v1::GetModelRequest get;
  get.set_name("m");
  v1::BackupRequest backup;
  backup.set_name("nightly-1");
  v1::ShardMapRequest map;
  map.set_model("f");
  std::string in;
  AppendFrame(0, 0, Bytes(sau), &in);
  AppendFrame(0, 2, Bytes(lmu), &in);
  AppendFrame(0, 0, Bytes(fuse), &in);
  AppendFrame(1, 1, Bytes(get), &in);
  AppendFrame(2, 3, Bytes(backup), &in);
  AppendFrame(3, 2, Bytes(map), &in);
  w.Write("rpc_admin", "create-get-backup-map", in);
  in.clear();
  sau.mutable_spec()->set_name("m");  // taken
  AppendFrame(0, 0, Bytes(sau), &in);
  sau.mutable_spec()->mutable_sau()->set_r(7);  // odd
  sau.mutable_spec()->set_name("n4");
  AppendFrame(0, 0, Bytes(sau), &in);
  backup.set_name("..");
  AppendFrame(2, 0, Bytes(backup), &in);
  get.set_name("other/m");
  AppendFrame(1, 2, Bytes(get), &in);
  w.Write("rpc_admin", "refusals", in);
}

}  // namespace
}  // namespace streamlearn::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_ROOT   (e.g. fuzz/corpus)\n");
    return 2;
  }
  streamlearn::fuzz::SeedWriter w(argv[1]);
  streamlearn::fuzz::LogEntries(w);
  streamlearn::fuzz::Snapshots(w);
  streamlearn::fuzz::Manifests(w);
  streamlearn::fuzz::AuditLines(w);
  streamlearn::fuzz::TreeHeads(w);
  streamlearn::fuzz::SauRequests(w);
  streamlearn::fuzz::LmuRequests(w);
  streamlearn::fuzz::FuseRequests(w);
  streamlearn::fuzz::AdminRequests(w);
  std::printf("make_seeds: wrote %d seeds under %s\n", w.written(), argv[1]);
  return 0;
}
