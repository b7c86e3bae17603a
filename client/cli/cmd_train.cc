// streamlearn train: streams a libsvm or VW file of samples into a model's LMU over one
// pipelined Update stream, then prints what the server applied.

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/progress.h"
#include "client/cli/stream_command.h"
#include "client/lib/sample_file.h"
#include "core/common/mutex.h"
#include "absl/strings/string_view.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kTrainUsage[] =
    "streamlearn train MODEL FILE|- [--format libsvm|vw] [--batch 256] [--routing-key K]\n"
    "         [--hash-strings] [--window 64] [--t-offset N]\n"
    "  libsvm: y id:val id:val ...  (ids unsigned integers; y comma-separated when m > 1)\n"
    "  VW:     y [weight] ['tag]|namespace feat[:val] feat ...  (features hashed to ids)\n"
    "  t is the line number (plus --t-offset); the format comes from the extension (.vw)\n"
    "  unless --format.";

// The sample index a server message names ("sample 5 (t=306): ..."), if any.
std::optional<size_t> SampleIndexOf(absl::string_view message) {
  constexpr absl::string_view kPrefix = "sample ";
  if (message.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  message.remove_prefix(kPrefix.size());
  size_t index = 0;
  const auto [end, ec] = std::from_chars(message.data(), message.data() + message.size(), index);
  if (ec != std::errc() || end == message.data()) return std::nullopt;
  return index;
}

// What the acks said, filled in on the session's reader thread.
class UpdateTally {
 public:
  UpdateTally(std::string path) : path_(std::move(path)) {}

  // Called on the writer thread before the batch is sent: the file line of each sample.
  void NoteBatch(uint64_t batch, std::vector<uint64_t> lines) {
    MutexLock lock(&mu_);
    lines_[batch] = std::move(lines);
  }

  void OnAck(const UpdateResult& r) {
    MutexLock lock(&mu_);
    const std::vector<uint64_t> lines = std::move(lines_[r.batch]);
    lines_.erase(r.batch);
    if (!r.status.ok()) {
      const std::optional<size_t> i = SampleIndexOf(r.status.message());
      const uint64_t line = i && *i < lines.size() ? lines[*i] : lines.front();
      rejections_.push_back(fmt::format("{}:{}: rejected batch {} (lines {}-{}): {}", path_, line,
                                        r.batch, lines.front(), lines.back(),
                                        r.status.ToString()));
      return;
    }
    versions_[r.ack.shard()] = {r.ack.ver_base(), r.ack.ver_delta()};
    inserted_ += r.ack.inserted();
    max_lookup_ = std::max(max_lookup_, r.ack.c_lookup_p100());
    max_insert_ = std::max(max_insert_, r.ack.c_insert_p100());
  }

  std::vector<std::string> rejections() const {
    MutexLock lock(&mu_);
    return rejections_;
  }

  void PrintSummary(uint64_t samples_read, const BatchStats& stats, double seconds) const {
    MutexLock lock(&mu_);
    std::cout << fmt::format(
        "trained {}: {} samples read, {} applied, {} duplicates, {} of {} batches rejected, "
        "{} ids inserted, {:.2f} s ({:.0f} samples/s)\n",
        path_, samples_read, stats.events_applied, stats.duplicates, stats.batches_rejected,
        stats.batches_sent, inserted_, seconds, seconds > 0 ? stats.events_applied / seconds : 0.0);
    if (versions_.empty()) return;
    std::string line = "  final version:";
    for (const auto& [shard, v] : versions_) {
      line += fmt::format("{} shard {} -> ver_base {} ver_delta {}", line.back() == ':' ? "" : ",",
                          shard, v.first, v.second);
    }
    std::cout << line << "\n"
              << fmt::format("  max probes: lookup {}, insert {} (per-batch p100 over the run)\n",
                             max_lookup_, max_insert_);
  }

 private:
  const std::string path_;
  mutable Mutex mu_;
  // Batch -> file line per sample.
  std::map<uint64_t, std::vector<uint64_t>> lines_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> rejections_ ABSL_GUARDED_BY(mu_);
  // Shard -> (ver_base, ver_delta).
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> versions_ ABSL_GUARDED_BY(mu_);
  uint64_t inserted_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t max_lookup_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t max_insert_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

int RunTrain(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kTrainUsage);
  StreamFlags stream;
  AddStreamFlags(parser, "samples", "routing key of every sample", &stream);
  std::optional<std::string> format_name;
  std::optional<uint64_t> t_offset;
  bool hash_strings = false;
  parser.AddString("--format", &format_name, "libsvm or vw (default: vw for .vw, else libsvm)");
  parser.AddBool("--hash-strings", &hash_strings,
                 "libsvm: hash every id token as a string (VW features are always hashed)");
  parser.AddUint("--t-offset", &t_offset,
                 "added to each line number to make t (default 0); use it to train a second "
                 "file into a shard after the first",
                 uint64_t{1} << 62);
  if (std::optional<int> exit = ParseStreamCommand(parser, args, "train", stream)) return *exit;
  const std::string& model = parser.positional()[0];
  const std::string& path = parser.positional()[1];
  SampleFormat format = SampleFormatFromPath(path);
  if (format_name) {
    absl::StatusOr<SampleFormat> f = ParseSampleFormat(*format_name);
    if (!f.ok()) return ReportError(f.status(), kExitUsage);
    format = *f;
  }

  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::ModelInfo> info = client->GetModel(model);
  if (!info.ok()) return ReportError(info.status());
  if (!info->spec().has_lmu()) {
    return ReportError(absl::FailedPreconditionError(
        "model '" + model + "' has no lmu part; create one with --lmu to train it"));
  }
  const int m = static_cast<int>(info->spec().lmu().m());
  const double model_lr = info->spec().lmu().lr();
  absl::StatusOr<std::unique_ptr<SampleFileReader>> reader =
      SampleFileReader::Open(path, format, std::max(m, 1), hash_strings);
  if (!reader.ok()) return ReportError(reader.status(), kExitUsage);

  UpdateTally tally(path);
  LmuUpdateSession::Options session_options;
  session_options.window = stream.window_size();
  session_options.on_ack = [&tally](const UpdateResult& r) { tally.OnAck(r); };
  absl::StatusOr<std::unique_ptr<LmuUpdateSession>> session =
      client->OpenLmuUpdate(model, std::move(session_options));
  if (!session.ok()) return ReportError(session.status());

  ProgressBar progress(isatty(STDERR_FILENO) != 0, (*reader)->size_bytes(), "samples");
  // Each batch goes in columns (lmu.proto SampleColumns): no message per sample, and no
  // values at all while every value of the batch is 1.0 (binary features).
  v1::UpdateRequest request;
  const std::string routing_key = stream.routing_key.value_or(kDefaultRoutingKey);
  request.set_routing_key(routing_key);
  // vals stays empty while every value of the batch so far is 1.0.
  v1::SampleColumns* columns = request.mutable_columns();
  int last_ids = 0;  // the previous batch's ids, to reserve the next one's room
  std::vector<uint64_t> lines;  // of the batch being filled
  uint64_t batches = 0;
  auto send_batch = [&]() -> absl::Status {
    if (columns->t_size() == 0) return absl::OkStatus();
    tally.NoteBatch(batches++, std::move(lines));
    lines.clear();
    last_ids = columns->ids_size();
    absl::Status s = (*session)->Send(std::move(request));
    request.Clear();
    request.set_routing_key(routing_key);
    columns = request.mutable_columns();
    columns->mutable_ids()->Reserve(last_ids);
    return s;
  };
  const double kModelRate = std::numeric_limits<double>::quiet_NaN();  // lr column: the model's
  auto add = [&](const SampleRecord& record) -> absl::Status {
    const int before = columns->ids_size();
    columns->add_t(record.t + t_offset.value_or(0));
    columns->add_counts(static_cast<uint32_t>(record.ids.size()));
    columns->mutable_ids()->Add(record.ids.begin(), record.ids.end());
    bool ones = columns->vals_size() == 0;  // (a sample has at least one feature)
    if (ones && !std::all_of(record.vals.begin(), record.vals.end(),
                             [](double v) { return v == 1.0; })) {
      ones = false;  // the batch's earlier values were all 1.0: write them out
      columns->mutable_vals()->Reserve(last_ids);
      for (int j = 0; j < before; ++j) columns->add_vals(1.0);
    }
    if (!ones) columns->mutable_vals()->Add(record.vals.begin(), record.vals.end());
    columns->mutable_y()->Add(record.y.begin(), record.y.end());
    if (record.weight != 1 || columns->lr_size() != 0) {  // VW importance weight
      while (columns->lr_size() < columns->t_size() - 1) columns->add_lr(kModelRate);
      columns->add_lr(record.weight != 1 ? record.weight * model_lr : kModelRate);
    }
    lines.push_back(record.t);
    if (static_cast<size_t>(columns->t_size()) < stream.batch_limit()) {
      return absl::OkStatus();
    }
    return send_batch();
  };
  const PumpResult run = PumpFile<SampleRecord>(**reader, **session, progress, add, send_batch);

  const std::vector<std::string> rejections = tally.rejections();
  for (const std::string& r : rejections) std::cerr << "error: " << r << "\n";
  tally.PrintSummary(run.read, (*session)->stats(), run.seconds);
  return FinishRun(run.input_error, run.stream_error, rejections.size(), "samples");
}

}  // namespace streamlearn::cli
