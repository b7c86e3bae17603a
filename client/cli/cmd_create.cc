// streamlearn create: a model from flags, from a JSON ModelSpec, or both (flags win).

#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/model_format.h"

namespace streamlearn::cli {
namespace {

constexpr char kUsage[] =
    "streamlearn create --name NAME [--shards S] [--d D --dv DV --r R --gamma G --tau T\n"
    "         --input-scale A --raw-inputs --iid --antithetic --seed N --rv RV ...]\n"
    "       streamlearn create --spec-json FILE|- [flags overriding the file]\n"
    "  d, d_v and r are required; other unset numbers take the server's documented defaults.\n"
    "  The effective spec is printed.";

struct CreateFlags {
  std::optional<std::string> name, spec_json;
  std::optional<uint64_t> shards, d, dv, r, seed, rv;
  std::optional<double> gamma, tau, input_scale, c_lo, c_hi, alpha, kappa, beta_floor;
  bool raw_inputs = false, iid = false, antithetic = false, json = false;
};

void Register(ArgParser& p, CreateFlags& f) {
  constexpr uint64_t kU32 = 0xffffffffu;
  p.AddString("--name", &f.name, "model name, [A-Za-z0-9_.-]{1,64}");
  p.AddString("--spec-json", &f.spec_json,
              "a ModelSpec as JSON (proto field names), from FILE or - for stdin");
  p.AddUint("--shards", &f.shards, "number of shards (default 1)", kU32);
  p.AddUint("--d", &f.d, "key/query dimension", kU32);
  p.AddUint("--dv", &f.dv, "value dimension", kU32);
  p.AddUint("--r", &f.r, "random features", kU32);
  p.AddUint("--rv", &f.rv, "low-rank value dimension (0 = off)", kU32);
  p.AddUint("--seed", &f.seed, "seed of the random-feature matrix W");
  p.AddDouble("--gamma", &f.gamma, "decay in (0, 1] (default 0.99)");
  p.AddDouble("--tau", &f.tau, "temperature > 0 (default sqrt(d))");
  p.AddDouble("--input-scale", &f.input_scale, "input scale a: q, k -> a q/|q| (default 1)");
  p.AddDouble("--c-lo", &f.c_lo, "lower clip of the log-features (with --c-hi)");
  p.AddDouble("--c-hi", &f.c_hi, "upper clip of the log-features (with --c-lo)");
  p.AddDouble("--alpha", &f.alpha, "e-process level in (0, 1) (default 0.05)");
  p.AddDouble("--kappa", &f.kappa, "e-process null slack (default 0.25)");
  p.AddDouble("--beta-floor", &f.beta_floor, "base denominator floor (default 1e-12)");
  p.AddBool("--raw-inputs", &f.raw_inputs, "use q and k as given (no L2 normalisation)");
  p.AddBool("--iid", &f.iid, "i.i.d. Gaussian features instead of orthogonal blocks");
  p.AddBool("--antithetic", &f.antithetic, "antithetic feature pairs (w, -w); r % 4 == 0");
  p.AddBool("--json", &f.json, "print the created ModelInfo as JSON");
}

// Flags override whatever the JSON spec set.
void ApplyFlags(const CreateFlags& f, v1::ModelSpec* spec) {
  v1::SauSpec* s = spec->mutable_sau();
  if (f.name) spec->set_name(*f.name);
  if (f.shards) spec->set_shards(static_cast<uint32_t>(*f.shards));
  if (f.d) s->set_d(static_cast<uint32_t>(*f.d));
  if (f.dv) s->set_d_v(static_cast<uint32_t>(*f.dv));
  if (f.r) s->set_r(static_cast<uint32_t>(*f.r));
  if (f.rv) s->set_r_v(static_cast<uint32_t>(*f.rv));
  if (f.seed) s->set_seed(*f.seed);
  if (f.gamma) s->set_gamma(*f.gamma);
  if (f.tau) s->set_tau(*f.tau);
  if (f.input_scale) s->set_input_scale(*f.input_scale);
  if (f.c_lo) s->set_c_lo(*f.c_lo);
  if (f.c_hi) s->set_c_hi(*f.c_hi);
  if (f.alpha) s->set_alpha(*f.alpha);
  if (f.kappa) s->set_kappa(*f.kappa);
  if (f.beta_floor) s->set_beta_floor(*f.beta_floor);
  if (f.raw_inputs) s->set_input_mode(v1::INPUT_MODE_RAW);
  if (f.iid) s->set_features(v1::FEATURE_KIND_IID);
  if (f.antithetic) s->set_antithetic(true);
}

}  // namespace

int RunCreate(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kUsage);
  CreateFlags flags;
  Register(parser, flags);
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (!parser.positional().empty()) {
    return ReportError(absl::InvalidArgumentError("create takes no positional arguments (got '" +
                                                  parser.positional()[0] +
                                                  "'); use --name NAME"),
                       kExitUsage);
  }
  v1::ModelSpec spec;
  if (flags.spec_json) {
    absl::StatusOr<std::string> text = ReadWholeFile(*flags.spec_json);
    if (!text.ok()) return ReportError(text.status(), kExitUsage);
    const std::string what = *flags.spec_json == "-" ? "stdin" : *flags.spec_json;
    if (absl::Status s = JsonToProto(*text, what, &spec); !s.ok()) {
      return ReportError(s, kExitUsage);
    }
  }
  ApplyFlags(flags, &spec);
  if (spec.name().empty()) {
    return ReportError(absl::InvalidArgumentError("a model needs a name: pass --name NAME"),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::ModelInfo> info = client->CreateModel(spec);
  if (!info.ok()) return ReportError(info.status());
  if (flags.json) {
    std::cout << ProtoToJson(*info);
  } else {
    std::cout << "created " << DescribeModel(*info);
  }
  return kExitOk;
}

}  // namespace streamlearn::cli
