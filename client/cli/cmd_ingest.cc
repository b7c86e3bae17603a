// streamlearn ingest: streams a CSV or JSONL file of events into a model over one pipelined
// Ingest stream, then prints what the server applied.

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/progress.h"
#include "client/cli/stream_command.h"
#include "client/lib/event_file.h"
#include "core/common/mutex.h"
#include "core/common/status_macros.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kIngestUsage[] =
    "streamlearn ingest MODEL FILE|- [--routing-key K] [--batch 256] [--format csv|jsonl]\n"
    "  CSV: a header row t,k0..k{d-1},v0..v{dv-1}[,key]; JSONL: {\"t\":..,\"k\":[..],\"v\":[..],\"key\":\"..\"}.\n"
    "  t is optional (the line number is used); key is optional (--routing-key is used).";

std::string RjName(v1::RjLevel level) {
  switch (level) {
    case v1::RJ_LEVEL_YELLOW:
      return "YELLOW";
    case v1::RJ_LEVEL_RED:
      return "RED";
    default:
      return "GREEN";
  }
}

// What the acks said, filled in on the session's reader thread.
class AckTally {
 public:
  // Called on the writer thread before the batch is sent.
  void NoteBatch(uint64_t batch, uint64_t first_line, uint64_t last_line) {
    MutexLock lock(&mu_);
    lines_[batch] = {first_line, last_line};
  }

  void OnAck(const BatchResult& r) {
    MutexLock lock(&mu_);
    const auto lines = lines_[r.batch];
    lines_.erase(r.batch);
    if (!r.status.ok()) {
      rejections_.push_back(fmt::format("rejected batch {} (lines {}-{}, routing key '{}'): {}",
                                        r.batch, lines.first, lines.second, r.routing_key,
                                        r.status.ToString()));
      return;
    }
    versions_[r.ack.shard()] = r.ack.ver_sau();
    if (r.ack.applied() > 0) {
      last_ = r.ack.last();
      has_last_ = true;
    }
  }

  std::vector<std::string> rejections() const {
    MutexLock lock(&mu_);
    return rejections_;
  }
  std::map<uint32_t, uint64_t> versions() const {
    MutexLock lock(&mu_);
    return versions_;
  }
  std::optional<v1::Diagnostics> last() const {
    MutexLock lock(&mu_);
    return has_last_ ? std::optional<v1::Diagnostics>(last_) : std::nullopt;
  }

 private:
  mutable Mutex mu_;
  // Batch -> file lines.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> lines_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> rejections_ ABSL_GUARDED_BY(mu_);
  // Shard -> version after its last OK ack.
  std::map<uint32_t, uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  bool has_last_ ABSL_GUARDED_BY(mu_) = false;
  v1::Diagnostics last_ ABSL_GUARDED_BY(mu_);
};

void PrintSummary(const std::string& path, uint64_t events_read, const IngestStats& stats,
                  const AckTally& tally, double seconds) {
  std::cout << fmt::format(
      "ingested {}: {} events read, {} applied, {} duplicates, {} of {} batches rejected, "
      "{:.2f} s ({:.0f} events/s)\n",
      path, events_read, stats.events_applied, stats.duplicates, stats.batches_rejected,
      stats.batches_sent, seconds, seconds > 0 ? stats.events_applied / seconds : 0.0);
  const auto versions = tally.versions();
  if (!versions.empty()) {
    std::string line = "  final version:";
    for (const auto& [shard, version] : versions) {
      line += fmt::format("{} shard {} -> v{}", line.back() == ':' ? "" : ",", shard, version);
    }
    std::cout << line << "\n";
  }
  const std::optional<v1::Diagnostics> last = tally.last();
  if (last && last->has_ridge()) {
    std::cout << fmt::format("  last event: |k|^2 {:.4g}  scale (max |k|^2) {:.4g}\n",
                             last->ridge().key_norm2(), last->ridge().scale());
  } else if (last && last->has_vla()) {
    const v1::VlaDiagnostics& v = last->vla();
    std::cout << fmt::format(
        "  last event: {}residual |e| {:.4g}  alpha.k {:.4g}  |S|_F {:.4g}  |A|_F {:.4g}  "
        "keys skipped {}\n",
        v.skipped() ? "SKIPPED (|k| < key_eps)  " : "", v.residual_norm(), v.alpha_dot_k(),
        v.s_norm(), v.a_norm(), v.skipped_total());
  } else if (last) {
    std::cout << fmt::format(
        "  last event: margin {:.4g}  RJ {} (gap {:.3g} / threshold {:.3g})  beta_floor {:.3g}"
        "  lambda* {:.3g}  clip rate {:.3f}%  epoch {}{}\n",
        last->margin(), RjName(last->rj_level()), last->rj_gap(), last->rj_threshold(),
        last->beta_floor(), last->lambda_star(), 100.0 * last->clip_rate(), last->epoch(),
        last->alarm() ? "  ALARM" : "");
  }
}

}  // namespace

int RunIngest(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kIngestUsage);
  StreamFlags stream;
  AddStreamFlags(parser, "events", "routing key of events without their own", &stream);
  std::optional<std::string> format_name;
  parser.AddString("--format", &format_name, "csv or jsonl (default: from the extension)");
  if (std::optional<int> exit = ParseStreamCommand(parser, args, "ingest", stream)) return *exit;
  const std::string& model = parser.positional()[0];
  const std::string& path = parser.positional()[1];
  const size_t batch_limit = stream.batch_limit();
  absl::StatusOr<EventFormat> format = format_name ? ParseEventFormat(*format_name)
                                                   : EventFormatFromPath(path);
  if (!format.ok()) return ReportError(format.status(), kExitUsage);

  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::ModelInfo> info = client->GetModel(model);
  if (!info.ok()) return ReportError(info.status());
  if (!info->spec().has_sau()) {
    return ReportError(absl::FailedPreconditionError(
        "model '" + model + "' has no sau part; use 'streamlearn train' for its lmu part"));
  }
  const int d = static_cast<int>(info->spec().sau().d());
  const int d_v = static_cast<int>(info->spec().sau().d_v());
  if (d < 1 || d_v < 1) {
    return ReportError(absl::InternalError("server reported model '" + model +
                                           "' with d or d_v = 0"));
  }
  absl::StatusOr<std::unique_ptr<EventFileReader>> reader =
      EventFileReader::Open(path, *format, d, d_v);
  if (!reader.ok()) return ReportError(reader.status(), kExitUsage);

  AckTally tally;
  IngestSession::Options session_options;
  session_options.window = stream.window_size();
  session_options.on_ack = [&tally](const BatchResult& r) { tally.OnAck(r); };
  absl::StatusOr<std::unique_ptr<IngestSession>> session =
      client->OpenIngest(model, std::move(session_options));
  if (!session.ok()) return ReportError(session.status());

  ProgressBar progress(isatty(STDERR_FILENO) != 0, (*reader)->size_bytes());
  const std::string default_key = stream.routing_key.value_or(kDefaultRoutingKey);
  v1::IngestRequest request;
  uint64_t first_line = 0, last_line = 0, batches = 0;
  auto send_batch = [&]() -> absl::Status {
    if (request.events_size() == 0) return absl::OkStatus();
    tally.NoteBatch(batches++, first_line, last_line);
    absl::Status s = (*session)->Send(std::move(request));
    request.Clear();
    return s;
  };
  // Consecutive events with the same routing key form a batch.
  auto add = [&](const EventRecord& record) -> absl::Status {
    const std::string& key = record.has_key ? record.key : default_key;
    if (request.events_size() > 0 &&
        (key != request.routing_key() || static_cast<size_t>(request.events_size()) >= batch_limit)) {
      RETURN_IF_ERROR(send_batch());
    }
    if (request.events_size() == 0) {
      request.set_routing_key(key);
      first_line = (*reader)->line();
    }
    last_line = (*reader)->line();
    v1::Event* e = request.add_events();
    e->set_t(record.t);
    e->mutable_k()->Add(record.k.begin(), record.k.end());
    e->mutable_v()->Add(record.v.begin(), record.v.end());
    return absl::OkStatus();
  };
  const PumpResult run = PumpFile<EventRecord>(**reader, **session, progress, add, send_batch);

  const std::vector<std::string> rejections = tally.rejections();
  for (const std::string& r : rejections) std::cerr << "error: " << r << "\n";
  PrintSummary(path, run.read, (*session)->stats(), tally, run.seconds);
  return FinishRun(run.input_error, run.stream_error, rejections.size(), "events");
}

}  // namespace streamlearn::cli
