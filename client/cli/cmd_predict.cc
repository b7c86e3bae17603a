// streamlearn predict: the LMU's prediction at one sparse x, read from the shard of a
// routing key. streamlearn fuse-predict: a fused model's prediction at (x, q).

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/number_parse.h"
#include "client/lib/sample_file.h"
#include "client/lib/sample_parsers.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kPredictUsage[] =
    "streamlearn predict MODEL --x \"id:val,id:val,...\" [--routing-key K] [--hash-strings]\n"
    "         [--json]\n"
    "streamlearn predict MODEL --file FILE|- [--format libsvm|vw] [--batch 256] [--routing-key K]\n"
    "         [--hash-strings]\n"
    "  --file: a libsvm or VW file (as train reads it); prints each sample's prediction, one\n"
    "  line per sample (m comma-separated numbers), and the mean squared error against the\n"
    "  file's y on stderr. Read-only: the model does not learn.";
constexpr char kFuseUsage[] =
    "streamlearn fuse-predict MODEL --x \"id:val,id:val,...\" --q \"0.1,0.2,...\"\n"
    "         [--routing-key K] [--hash-strings] [--json]\n"
    "  The fused prediction the next learned sample with this (x, q) would get (read-only).";

// "3:0.5, 17:1" -> ids {3, 17}, vals {0.5, 1}.
absl::Status ParseX(std::string_view text, bool hash_strings, std::vector<uint64_t>* ids,
                    std::vector<double>* vals) {
  if (TrimBlanks(text).empty()) return absl::InvalidArgumentError("--x: no features given");
  size_t item = 1;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view pair = TrimBlanks(text.substr(0, comma));
    const size_t colon = pair.find(':');
    const std::string where = "--x: item " + std::to_string(item) + " '" + std::string(pair) + "'";
    if (colon == std::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(where + ": expected id:value");
    }
    const std::string_view id_text = pair.substr(0, colon);
    uint64_t id = 0;
    if (hash_strings) {
      id = FeatureHash("", id_text);
    } else if (!ParseUint64(id_text, &id)) {
      return absl::InvalidArgumentError(
          where + ": the id is not an unsigned 64-bit integer (string ids need --hash-strings)");
    }
    double val = 0;
    if (!ParseFiniteDouble(pair.substr(colon + 1), &val)) {
      return absl::InvalidArgumentError(where + ": the value is not a finite number");
    }
    ids->push_back(id);
    vals->push_back(val);
    if (comma == std::string_view::npos) return absl::OkStatus();
    text.remove_prefix(comma + 1);
    ++item;
  }
}

std::string ExactVector(const google::protobuf::RepeatedField<double>& v) {
  std::string out = "[";
  for (int i = 0; i < v.size(); ++i) out += fmt::format("{}{:.17g}", i > 0 ? ", " : "", v[i]);
  return out + "]";
}

// predict --file: the samples of `path` in requests of `batch` samples (Predict with counts),
// each prediction printed as it comes back.
int PredictFile(Client& client, const std::string& model, const std::string& routing_key,
                const std::string& path, std::optional<std::string> format_name,
                bool hash_strings, size_t batch) {
  SampleFormat format = SampleFormatFromPath(path);
  if (format_name) {
    absl::StatusOr<SampleFormat> f = ParseSampleFormat(*format_name);
    if (!f.ok()) return ReportError(f.status(), kExitUsage);
    format = *f;
  }
  absl::StatusOr<v1::ModelInfo> info = client.GetModel(model);
  if (!info.ok()) return ReportError(info.status());
  if (!info->spec().has_lmu()) {
    return ReportError(absl::FailedPreconditionError(
        "model '" + model + "' has no lmu part; predict reads the LMU"));
  }
  const int m = std::max(1, static_cast<int>(info->spec().lmu().m()));
  absl::StatusOr<std::unique_ptr<SampleFileReader>> reader =
      SampleFileReader::Open(path, format, m, hash_strings);
  if (!reader.ok()) return ReportError(reader.status(), kExitUsage);
  std::vector<uint64_t> ids;
  std::vector<double> vals, ys;
  std::vector<uint32_t> counts;
  uint64_t predicted = 0;
  uint64_t first_line = 0, last_line = 0;  // of the batch being filled
  double squared_error = 0;
  std::string out;
  auto flush = [&]() -> absl::Status {
    if (counts.empty()) return absl::OkStatus();
    absl::StatusOr<v1::PredictResponse> r =
        client.PredictMany(model, routing_key, ids, vals, counts);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          fmt::format("{} (the batch of lines {}-{})",
                                      std::string(r.status().message()), first_line, last_line));
    }
    if (r->y_hat_size() != static_cast<int>(counts.size()) * m) {
      return absl::InternalError(fmt::format("the server returned {} predictions for {} samples",
                                             r->y_hat_size(), counts.size()));
    }
    out.clear();
    for (size_t s = 0; s < counts.size(); ++s) {
      for (int o = 0; o < m; ++o) {
        const double y_hat = r->y_hat(static_cast<int>(s) * m + o);
        const double e = y_hat - ys[s * m + o];
        squared_error += e * e;
        out += fmt::format("{}{:.17g}", o > 0 ? "," : "", y_hat);
      }
      out += '\n';
    }
    std::cout << out;
    predicted += counts.size();
    ids.clear();
    vals.clear();
    ys.clear();
    counts.clear();
    return absl::OkStatus();
  };
  SampleRecord record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      if (absl::Status s = flush(); !s.ok()) return ReportError(s);
      return ReportError(more.status(), kExitUsage);
    }
    if (!*more) break;
    if (counts.empty()) first_line = record.t;
    last_line = record.t;
    ids.insert(ids.end(), record.ids.begin(), record.ids.end());
    vals.insert(vals.end(), record.vals.begin(), record.vals.end());
    ys.insert(ys.end(), record.y.begin(), record.y.end());
    counts.push_back(static_cast<uint32_t>(record.ids.size()));
    if (counts.size() >= batch) {
      if (absl::Status s = flush(); !s.ok()) return ReportError(s);
    }
  }
  if (absl::Status s = flush(); !s.ok()) return ReportError(s);
  std::cout.flush();
  std::cerr << fmt::format("predicted {} samples of {}: mean squared error {:.6g} against the "
                           "file's y{}\n",
                           predicted, path,
                           predicted > 0 ? squared_error / static_cast<double>(predicted * m) : 0.0,
                           m > 1 ? " (over every output)" : "");
  return kExitOk;
}

}  // namespace

int RunPredict(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kPredictUsage);
  std::optional<std::string> x_text, routing_key;
  bool hash_strings = false, json = false;
  parser.AddString("--x", &x_text, "sparse input, comma-separated id:value pairs");
  parser.AddUtf8String("--routing-key", &routing_key, "selects the shard (default \"default\")");
  parser.AddBool("--hash-strings", &hash_strings,
                 "hash every id as a string (as train --hash-strings does for libsvm)");
  parser.AddBool("--json", &json, "print the PredictResponse proto as JSON");
  std::optional<std::string> file, format_name;
  std::optional<uint64_t> batch;
  parser.AddString("--file", &file, "predict every sample of a libsvm or VW file (- is stdin)");
  parser.AddString("--format", &format_name, "with --file: libsvm or vw (default: from the extension)");
  parser.AddUint("--batch", &batch, "with --file: samples per request (default 256)", 4096);
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != 1) {
    return ReportError(
        absl::InvalidArgumentError("predict takes one model name\n" + parser.Usage()), kExitUsage);
  }
  if (file) {
    if (x_text || json) {
      return ReportError(absl::InvalidArgumentError("--file takes neither --x nor --json"),
                         kExitUsage);
    }
    if (batch && *batch == 0) {
      return ReportError(absl::InvalidArgumentError("--batch must be >= 1"), kExitUsage);
    }
    std::unique_ptr<Client> client = ConnectOrReport(options);
    if (client == nullptr) return kExitFailure;
    return PredictFile(*client, parser.positional()[0], routing_key.value_or(kDefaultRoutingKey),
                       *file, format_name, hash_strings, batch.value_or(256));
  }
  if (!x_text) {
    return ReportError(absl::InvalidArgumentError("pass --x \"id:val,...\" or --file FILE"),
                       kExitUsage);
  }
  std::vector<uint64_t> ids;
  std::vector<double> vals;
  if (absl::Status s = ParseX(*x_text, hash_strings, &ids, &vals); !s.ok()) {
    return ReportError(s, kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  const std::string& model = parser.positional()[0];
  absl::StatusOr<v1::PredictResponse> r =
      client->Predict(model, routing_key.value_or(kDefaultRoutingKey), ids, vals);
  if (!r.ok()) return ReportError(r.status());
  if (json) {
    std::cout << ProtoToJson(*r);
    return kExitOk;
  }
  std::cout << fmt::format("model      {}  (shard {})\n", model, r->shard())
            << fmt::format("y_hat      {}\n", ExactVector(r->y_hat()))
            << fmt::format("ver_base   {}\n", r->ver_base())
            << fmt::format("ver_delta  {}\n", r->ver_delta())
            << fmt::format("probes     {} (largest LOCATE over x)\n", r->probes_p100());
  return kExitOk;
}

int RunFusePredict(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kFuseUsage);
  std::optional<std::string> x_text, q_text, routing_key;
  bool hash_strings = false, json = false;
  parser.AddString("--x", &x_text, "sparse input, comma-separated id:value pairs");
  parser.AddString("--q", &q_text, "query vector, comma-separated numbers (length sau.d)");
  parser.AddUtf8String("--routing-key", &routing_key, "selects the shard (default \"default\")");
  parser.AddBool("--hash-strings", &hash_strings,
                 "hash every id as a string (as train --hash-strings does for libsvm)");
  parser.AddBool("--json", &json, "print the FusePredictResponse proto as JSON");
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != 1) {
    return ReportError(
        absl::InvalidArgumentError("fuse-predict takes one model name\n" + parser.Usage()),
        kExitUsage);
  }
  if (!x_text || !q_text) {
    return ReportError(absl::InvalidArgumentError("pass --x \"id:val,...\" and --q \"v,...\""),
                       kExitUsage);
  }
  std::vector<uint64_t> ids;
  std::vector<double> vals;
  if (absl::Status s = ParseX(*x_text, hash_strings, &ids, &vals); !s.ok()) {
    return ReportError(s, kExitUsage);
  }
  absl::StatusOr<std::vector<double>> q = ParseDoubleList(*q_text);
  if (!q.ok()) {
    return ReportError(absl::InvalidArgumentError("--q: " + std::string(q.status().message())),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  const std::string& model = parser.positional()[0];
  absl::StatusOr<v1::FusePredictResponse> r =
      client->FusePredict(model, routing_key.value_or(kDefaultRoutingKey), ids, vals, *q);
  if (!r.ok()) return ReportError(r.status());
  if (json) {
    std::cout << ProtoToJson(*r);
    return kExitOk;
  }
  std::cout << fmt::format("model      {}  (shard {})\n", model, r->shard())
            << fmt::format("y_hat      {}\n", ExactVector(r->y_hat()))
            << fmt::format("y_hat_sau  {}\n", ExactVector(r->y_hat_sau()))
            << fmt::format("y_hat_lmu  {}\n", ExactVector(r->y_hat_lmu()))
            << fmt::format("gate       {:.17g}\n", r->gate())
            << fmt::format("rj_gap     {:.6g}  margin {:.6g}  den {:.6g}\n", r->rj_gap(),
                           r->margin(), r->den())
            << fmt::format("versions   sau {}  base {}  delta {}\n", r->ver_sau(), r->ver_base(),
                           r->ver_delta());
  return kExitOk;
}

}  // namespace streamlearn::cli
