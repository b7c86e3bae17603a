// streamlearn ingest: streams a CSV or JSONL file of events into a model over one pipelined
// Ingest stream, then prints what the server applied.

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/progress.h"
#include "client/lib/event_file.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kUsage[] =
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
    std::lock_guard<std::mutex> lock(mu_);
    lines_[batch] = {first_line, last_line};
  }

  void OnAck(const BatchResult& r) {
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    return rejections_;
  }
  std::map<uint32_t, uint64_t> versions() const {
    std::lock_guard<std::mutex> lock(mu_);
    return versions_;
  }
  std::optional<v1::Diagnostics> last() const {
    std::lock_guard<std::mutex> lock(mu_);
    return has_last_ ? std::optional<v1::Diagnostics>(last_) : std::nullopt;
  }

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> lines_;  // batch -> file lines
  std::vector<std::string> rejections_;
  std::map<uint32_t, uint64_t> versions_;  // shard -> version after its last OK ack
  bool has_last_ = false;
  v1::Diagnostics last_;
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
  if (const std::optional<v1::Diagnostics> last = tally.last()) {
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
  ArgParser parser(kUsage);
  std::optional<std::string> routing_key, format_name;
  std::optional<uint64_t> batch_size, window;
  parser.AddString("--routing-key", &routing_key,
                   "routing key of events without their own (default \"default\")");
  parser.AddUint("--batch", &batch_size, "events per batch (default 256)", 1u << 20);
  parser.AddString("--format", &format_name, "csv or jsonl (default: from the extension)");
  parser.AddUint("--window", &window, "batches in flight (default 64)", 1u << 16);
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != 2) {
    return ReportError(absl::InvalidArgumentError("ingest takes a model name and a file\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  const std::string& model = parser.positional()[0];
  const std::string& path = parser.positional()[1];
  const size_t batch_limit = batch_size.value_or(256);
  if (batch_limit == 0 || window.value_or(64) == 0) {
    return ReportError(absl::InvalidArgumentError("--batch and --window must be >= 1"),
                       kExitUsage);
  }
  absl::StatusOr<EventFormat> format = format_name ? ParseEventFormat(*format_name)
                                                   : EventFormatFromPath(path);
  if (!format.ok()) return ReportError(format.status(), kExitUsage);

  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::ModelInfo> info = client->GetModel(model);
  if (!info.ok()) return ReportError(info.status());
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
  session_options.window = window.value_or(64);
  session_options.on_ack = [&tally](const BatchResult& r) { tally.OnAck(r); };
  absl::StatusOr<std::unique_ptr<IngestSession>> session =
      client->OpenIngest(model, std::move(session_options));
  if (!session.ok()) return ReportError(session.status());

  const auto start = std::chrono::steady_clock::now();
  ProgressBar progress(isatty(STDERR_FILENO) != 0, (*reader)->size_bytes());
  const std::string default_key = routing_key.value_or(kDefaultRoutingKey);
  v1::IngestRequest request;
  uint64_t first_line = 0, last_line = 0, events_read = 0, batches = 0;
  absl::Status input_error, stream_error;

  auto send_batch = [&]() -> absl::Status {
    if (request.events_size() == 0) return absl::OkStatus();
    tally.NoteBatch(batches++, first_line, last_line);
    absl::Status s = (*session)->Send(std::move(request));
    request.Clear();
    return s;
  };

  EventRecord record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      input_error = more.status();
      break;
    }
    if (!*more) break;
    ++events_read;
    const std::string& key = record.has_key ? record.key : default_key;
    if (request.events_size() > 0 &&
        (key != request.routing_key() || static_cast<size_t>(request.events_size()) >= batch_limit)) {
      if (stream_error = send_batch(); !stream_error.ok()) break;
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
    progress.Update((*reader)->bytes_read(), events_read);
  }
  // Events read before a bad line are still sent: a re-run after fixing the line gets them
  // back as duplicates (same t), so stopping here never applies anything twice.
  if (stream_error.ok()) stream_error = send_batch();
  const absl::Status finish = (*session)->Finish();
  if (stream_error.ok()) stream_error = finish;
  progress.Finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::vector<std::string> rejections = tally.rejections();
  for (const std::string& r : rejections) std::cerr << "error: " << r << "\n";
  PrintSummary(path, events_read, (*session)->stats(), tally, seconds);
  if (!input_error.ok()) {
    std::cerr << "stopped at the first bad line; the events before it were sent\n";
    return ReportError(input_error, kExitUsage);
  }
  if (!stream_error.ok()) return ReportError(stream_error);
  if (!rejections.empty()) {
    std::cerr << "error: " << rejections.size() << " batch(es) rejected by the server\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace streamlearn::cli
