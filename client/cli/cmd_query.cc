// streamlearn query: attention at one query vector, read from the shard of a routing key.

#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/lib/number_parse.h"
#include "core/common/strict_json.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace streamlearn::cli {
namespace {

constexpr char kQueryUsage[] =
    "streamlearn query MODEL (--q \"0.1,0.2,...\" | --q-json '[0.1, 0.2, ...]')\n"
    "         [--path stabilized|correctness] [--low-rank] [--routing-key K] [--json]";

absl::StatusOr<std::vector<double>> ParseQJson(const std::string& text) {
  absl::StatusOr<nlohmann::json> parsed = ParseStrictJson(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError("--q-json: not valid JSON: " +
                                      std::string(parsed.status().message()));
  }
  const nlohmann::json& j = *parsed;
  if (!j.is_array() || j.empty()) {
    return absl::InvalidArgumentError("--q-json: expected a non-empty JSON array of numbers");
  }
  std::vector<double> q;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number()) {
      return absl::InvalidArgumentError("--q-json: item " + std::to_string(i + 1) +
                                        " is not a number: " + j[i].dump());
    }
    q.push_back(j[i].get<double>());
  }
  return q;
}

std::string ShortVector(const google::protobuf::RepeatedField<double>& v) {
  std::string out = "[";
  for (int i = 0; i < v.size(); ++i) out += fmt::format("{}{:.6g}", i > 0 ? ", " : "", v[i]);
  return out + "]";
}

}  // namespace

int RunQuery(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kQueryUsage);
  std::optional<std::string> q_text, q_json, path_name, routing_key;
  std::optional<uint64_t> min_version;
  bool low_rank = false, json = false;
  parser.AddString("--q", &q_text, "query vector, comma-separated numbers (length d)");
  parser.AddString("--q-json", &q_json, "query vector as a JSON array");
  parser.AddString("--path", &path_name,
                   "stabilized (default; whitened, ridge and floor) or correctness (eq. 19)");
  parser.AddBool("--low-rank", &low_rank, "low-rank value readout (model needs r_v > 0)");
  parser.AddUtf8String("--routing-key", &routing_key, "selects the shard (default \"default\")");
  parser.AddUint("--min-version", &min_version, "fail unless the shard reached this version");
  parser.AddBool("--json", &json, "print the QueryResponse proto as JSON");
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != 1) {
    return ReportError(absl::InvalidArgumentError("query takes one model name\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  if (q_text.has_value() == q_json.has_value()) {
    return ReportError(absl::InvalidArgumentError("pass exactly one of --q and --q-json"),
                       kExitUsage);
  }
  absl::StatusOr<std::vector<double>> q = q_text ? ParseDoubleList(*q_text) : ParseQJson(*q_json);
  if (!q.ok()) {
    return ReportError(q_text ? absl::InvalidArgumentError("--q: " + std::string(q.status().message()))
                              : q.status(),
                       kExitUsage);
  }
  v1::ReadoutPath path = v1::READOUT_PATH_STABILIZED;
  if (path_name && *path_name == "correctness") {
    path = v1::READOUT_PATH_CORRECTNESS;
  } else if (path_name && *path_name != "stabilized") {
    return ReportError(absl::InvalidArgumentError("--path: expected stabilized or correctness, got '" +
                                                  *path_name + "'"),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  const std::string& model = parser.positional()[0];
  absl::StatusOr<v1::QueryResponse> r =
      client->Query(model, routing_key.value_or(kDefaultRoutingKey), *q, path, low_rank,
                    min_version.value_or(0));
  if (!r.ok()) return ReportError(r.status());
  if (json) {
    std::cout << ProtoToJson(*r);
    return kExitOk;
  }
  if (r->engine() != v1::ENGINE_PRF) {
    std::cout << fmt::format("model    {}  (shard {}, version {}, {} events)\n", model,
                             r->shard(), r->ver_sau(), r->events())
              << fmt::format("engine   {}\n", r->engine() == v1::ENGINE_RIDGE ? "ridge" : "vla")
              << fmt::format("y_hat    {}\n", ShortVector(r->y_hat()));
    if (r->engine() == v1::ENGINE_RIDGE) {
      std::cout << fmt::format("lambda   [{:.6g}, {:.6g}] (condition {:.6g})\n", r->lambda_min(),
                               r->lambda_max(), r->condition())
                << fmt::format("residual {:.3g}{}\n", r->residual(),
                               r->jitter() > 0 ? fmt::format("  (jitter {:g})", r->jitter())
                                               : std::string());
    } else {
      std::cout << fmt::format("|S|_F    {:.6g}\n", r->s_norm());
    }
    std::cout << fmt::format("version  {}\n", r->ver_sau());
    return kExitOk;
  }
  std::cout << fmt::format("model    {}  (shard {}, version {}, {} events)\n", model, r->shard(),
                           r->ver_sau(), r->events())
            << fmt::format("path     {}{}\n", path == v1::READOUT_PATH_CORRECTNESS ? "correctness" : "stabilized",
                           low_rank ? ", low-rank" : "")
            << fmt::format("y_hat    {}{}\n", ShortVector(r->y_hat()),
                           r->exact_window() ? "  (exact softmax over the last events: the "
                                               "denominator was thin)"
                                             : "")
            << fmt::format("den      {:.6g}\n", r->den())
            << fmt::format("rj_gap   {:.6g}\n", r->rj_gap())
            << fmt::format("margin   {:.6g}\n", r->margin())
            << fmt::format("shr      {:.6g}\n", r->shr())
            << fmt::format("version  {}\n", r->ver_sau());
  return kExitOk;
}

}  // namespace streamlearn::cli
