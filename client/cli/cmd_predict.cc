// streamlearn predict: the LMU's prediction at one sparse x, read from the shard of a
// routing key. streamlearn fuse-predict: a fused model's prediction at (x, q).

#include <iostream>
#include <optional>
#include <vector>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/number_parse.h"
#include "client/lib/sample_parsers.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kPredictUsage[] =
    "streamlearn predict MODEL --x \"id:val,id:val,...\" [--routing-key K] [--hash-strings]\n"
    "         [--json]";
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
  if (!x_text) return ReportError(absl::InvalidArgumentError("pass --x \"id:val,...\""), kExitUsage);
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
