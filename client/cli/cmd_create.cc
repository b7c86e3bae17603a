// streamlearn create: a model from flags, from a JSON ModelSpec, or both (flags win); an SAU
// part, an LMU part, or both; or a fuse part alone (--fuse: the SAU and LMU flags then set the
// fused learner's own SAU and LMU).

#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/model_format.h"

namespace streamlearn::cli {
namespace {

constexpr char kCreateUsage[] =
    "streamlearn create --name NAME [--shards S] [--d D --dv DV --r R --gamma G --tau T\n"
    "         --input-scale A --raw-inputs --iid|--srht --[no-]antithetic --seed N --rv RV\n"
    "         --regulate-gamma [--gamma-max G] --regulate-clip [--c-hi-max C]\n"
    "         --exact-window W ...]\n"
    "         [--lmu [--m M --lr LR --l2 L2 --schedule constant|inverse-sqrt\n"
    "          --delta-buckets B --tau-low X --tau-high Y --lambda-max N --rebuild-seconds T\n"
    "          --margin K --inline-rebuild]] [--no-sau]\n"
    "       streamlearn create --name NAME --engine ridge|vla --d D --dv DV\n"
    "         [--ridge-gamma G --ridge-eps E --filter-order K | --vla-lambda0 L]\n"
    "       streamlearn create --name NAME --fuse [--pattern meta_linear|attention_as_feature|\n"
    "         linear_as_gate] --d D (--r R | --engine ridge|vla) [--dv M] [SAU flags]\n"
    "         [LMU flags]\n"
    "       streamlearn create --spec-json FILE|- [flags overriding the file]\n"
    "  A model has an SAU part (d, d_v and r are required), an LMU part (--lmu), or both;\n"
    "  --engine ridge or vla gives the SAU part another memory (docs/ENGINES.md): exact\n"
    "  recall of bound keys, no random features (no --r); with --fuse, the fused model's\n"
    "  attention part (docs/FUSE.md, \"Other engines\").\n"
    "  --no-sau makes an LMU-only model. --fuse makes a fused model (a fuse part alone): the\n"
    "  SAU flags set its SAU (q has dimension d; d_v = m, the target's dimension, by default)\n"
    "  and the LMU flags its LMU. Other unset numbers take the server's documented\n"
    "  defaults. The effective spec is printed.";

struct CreateFlags {
  std::optional<std::string> name, spec_json;
  std::optional<uint64_t> shards, d, dv, r, seed, rv;
  std::optional<double> gamma, tau, input_scale, c_lo, c_hi, alpha, kappa, beta_floor;
  // Self-regulation (docs/SAU.md, "Self-regulation"); a cap implies its switch.
  bool regulate_gamma = false, regulate_clip = false;
  std::optional<double> gamma_max, c_hi_max;
  std::optional<uint64_t> exact_window;
  // The engine (docs/ENGINES.md) and its parameters.
  std::optional<std::string> engine;
  std::optional<double> ridge_gamma, ridge_eps, vla_lambda0;
  std::optional<uint64_t> filter_order;
  bool raw_inputs = false, iid = false, srht = false, antithetic = false, no_antithetic = false,
       json = false;
  // LMU part.
  bool lmu = false, no_sau = false, inline_rebuild = false;
  std::optional<uint64_t> m, delta_buckets, max_delta_buckets;
  std::optional<double> lr, l2, tau_low, tau_high, lambda_max, rebuild_seconds, margin;
  std::optional<std::string> schedule;
  // Fuse part.
  bool fuse = false;
  std::optional<std::string> pattern;

  bool AnySauFlag() const {
    return d || dv || r || seed || rv || gamma || tau || input_scale || c_lo || c_hi || alpha ||
           kappa || beta_floor || raw_inputs || iid || srht || antithetic || no_antithetic || engine ||
           regulate_gamma || regulate_clip || gamma_max || c_hi_max || exact_window ||
           ridge_gamma ||
           ridge_eps || vla_lambda0 || filter_order;
  }
  bool AnyLmuFlag() const {
    return m || delta_buckets || max_delta_buckets || lr || l2 || tau_low || tau_high ||
           lambda_max || rebuild_seconds || margin || schedule || inline_rebuild;
  }
};

void Register(ArgParser& p, CreateFlags& f) {
  constexpr uint64_t kU32 = 0xffffffffu;
  p.AddUtf8String("--name", &f.name, "model name, [A-Za-z0-9_.-]{1,64}");
  p.AddString("--spec-json", &f.spec_json,
              "a ModelSpec as JSON (proto field names), from FILE or - for stdin");
  p.AddUint("--shards", &f.shards, "number of shards (default 1)", kU32);
  p.AddUint("--d", &f.d, "key/query dimension", kU32);
  p.AddUint("--dv", &f.dv, "value dimension", kU32);
  p.AddString("--engine", &f.engine,
              "the SAU's memory: prf (default; decayed softmax attention), ridge (exact recall "
              "of bound keys) or vla (docs/ENGINES.md)");
  p.AddDouble("--ridge-gamma", &f.ridge_gamma, "ridge engine: decay in (0, 1] (default 1)");
  p.AddDouble("--ridge-eps", &f.ridge_eps,
              "ridge engine: ridge relative to max |k|^2, (0, 1] (default 1e-3)");
  p.AddUint("--filter-order", &f.filter_order,
            "ridge engine: Koopman power filter K, 0..8 (default 0: plain recall)", kU32);
  p.AddDouble("--vla-lambda0", &f.vla_lambda0, "vla engine: A_0 = I/lambda0 (default 0.1)");
  p.AddUint("--r", &f.r, "random features (prf engine)", kU32);
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
  p.AddBool("--srht", &f.srht,
            "structured orthogonal features (Hadamard blocks with random signs, seed 001 R8) "
            "instead of QR blocks");
  p.AddBool("--antithetic", &f.antithetic,
            "antithetic feature pairs (w, -w); needs r % 4 == 0 (the default when it holds)");
  p.AddBool("--no-antithetic", &f.no_antithetic, "unpaired feature rows");
  p.AddBool("--regulate-gamma", &f.regulate_gamma,
            "widen the window (gamma up, doubling 1/(1-gamma) a step) while denominators are "
            "thin, back after a cooldown (seed 001 F1; docs/SAU.md, \"Self-regulation\")");
  p.AddDouble("--gamma-max", &f.gamma_max,
              "the widest gamma --regulate-gamma reaches (default 0.999); implies it");
  p.AddBool("--regulate-clip", &f.regulate_clip,
            "raise c_hi one step at an e-process epoch's end while more than 1% of the "
            "log-features were clipped (seed 001 C4, F2)");
  p.AddDouble("--c-hi-max", &f.c_hi_max,
              "the highest c_hi --regulate-clip reaches (default c_hi + 3 steps); implies it");
  p.AddUint("--exact-window", &f.exact_window,
            "keep the last W events and answer a query whose denominator is thin by exact "
            "softmax over them (seed 001 F1; 0 = off, the default; at most 4096)",
            kU32);
  p.AddBool("--lmu", &f.lmu, "add an LMU part (exact sparse linear learner); LMU flags imply it");
  p.AddBool("--no-sau", &f.no_sau, "no SAU part: an LMU-only model");
  p.AddUint("--m", &f.m, "LMU outputs per id, 1..256 (default 1)", kU32);
  p.AddDouble("--lr", &f.lr, "LMU learning rate in (0, 10] (default 0.05)");
  p.AddDouble("--l2", &f.l2, "LMU L2 shrinkage, [0, 1/lr) (default 0)");
  p.AddString("--schedule", &f.schedule, "LMU learning-rate schedule: constant or inverse-sqrt");
  p.AddUint("--delta-buckets", &f.delta_buckets,
            "LMU delta buckets, a power of two (default 4096; capacity 4 per bucket)", kU32);
  p.AddUint("--max-delta-buckets", &f.max_delta_buckets,
            "the most buckets the delta grows to under pressure, a power of two >= "
            "--delta-buckets (default 4x; equal to --delta-buckets: never grows)",
            kU32);
  p.AddDouble("--tau-low", &f.tau_low, "delta load that starts a rebuild (default 0.6)");
  p.AddDouble("--tau-high", &f.tau_high, "delta load a rebuild must beat (default 0.8)");
  p.AddDouble("--lambda-max", &f.lambda_max, "novel ids per second, at most (default 1000)");
  p.AddDouble("--rebuild-seconds", &f.rebuild_seconds, "rebuild bound T_rb assumed (default 1)");
  p.AddDouble("--margin", &f.margin, "headroom in ids of the scheduling inequality (default 512)");
  p.AddBool("--inline-rebuild", &f.inline_rebuild,
            "rebuild on the writer (stable mode: reproducible layout)");
  p.AddBool("--fuse", &f.fuse,
            "a fused model: SAU + LMU + gate + control plane per shard (docs/FUSE.md)");
  p.AddString("--pattern", &f.pattern,
              "fusion pattern: meta_linear (default), attention_as_feature or linear_as_gate");
  p.AddBool("--json", &f.json, "print the created ModelInfo as JSON");
}

absl::StatusOr<v1::FusePattern> ParsePattern(const std::string& name) {
  if (name == "meta_linear" || name == "meta-linear") return v1::FUSE_PATTERN_META_LINEAR;
  if (name == "attention_as_feature" || name == "attention-as-feature") {
    return v1::FUSE_PATTERN_ATTENTION_AS_FEATURE;
  }
  if (name == "linear_as_gate" || name == "linear-as-gate") return v1::FUSE_PATTERN_LINEAR_AS_GATE;
  return absl::InvalidArgumentError(
      "--pattern: expected meta_linear, attention_as_feature or linear_as_gate, got '" + name +
      "'");
}

absl::StatusOr<v1::LrSchedule> ParseSchedule(const std::string& name) {
  if (name == "constant") return v1::LR_SCHEDULE_CONSTANT;
  if (name == "inverse-sqrt") return v1::LR_SCHEDULE_INVERSE_SQRT;
  return absl::InvalidArgumentError("--schedule: expected constant or inverse-sqrt, got '" +
                                    name + "'");
}

absl::StatusOr<v1::Engine> ParseEngine(const std::string& name) {
  if (name == "prf") return v1::ENGINE_PRF;
  if (name == "ridge") return v1::ENGINE_RIDGE;
  if (name == "vla") return v1::ENGINE_VLA;
  return absl::InvalidArgumentError("--engine: expected prf, ridge or vla, got '" + name + "'");
}

// Flags override whatever the JSON spec set.
absl::Status ApplySauFlags(const CreateFlags& f, v1::SauSpec* s) {
  if (f.engine) {
    absl::StatusOr<v1::Engine> engine = ParseEngine(*f.engine);
    if (!engine.ok()) return engine.status();
    s->set_engine(*engine);
  }
  if (f.ridge_gamma) s->mutable_ridge()->set_gamma(*f.ridge_gamma);
  if (f.ridge_eps) s->mutable_ridge()->set_eps(*f.ridge_eps);
  if (f.filter_order) s->mutable_ridge()->set_filter_order(static_cast<uint32_t>(*f.filter_order));
  if (f.vla_lambda0) s->mutable_vla()->set_lambda0(*f.vla_lambda0);
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
  if (f.iid && f.srht) {
    return absl::InvalidArgumentError("--iid and --srht are two feature kinds: give one");
  }
  if (f.iid) s->set_features(v1::FEATURE_KIND_IID);
  if (f.srht) s->set_features(v1::FEATURE_KIND_SRHT);
  if (f.antithetic && f.no_antithetic) {
    return absl::InvalidArgumentError("--antithetic and --no-antithetic contradict: give one");
  }
  if (f.antithetic) s->set_antithetic(true);
  if (f.no_antithetic) s->set_antithetic(false);
  if (f.regulate_gamma || f.gamma_max) s->set_regulate_gamma(true);
  if (f.gamma_max) s->set_gamma_max(*f.gamma_max);
  if (f.regulate_clip || f.c_hi_max) s->set_regulate_clip(true);
  if (f.c_hi_max) s->set_c_hi_max(*f.c_hi_max);
  if (f.exact_window) s->set_exact_window(static_cast<uint32_t>(*f.exact_window));
  return absl::OkStatus();
}

absl::Status ApplyLmuFlags(const CreateFlags& f, v1::LmuSpec* s) {
  if (f.m) s->set_m(static_cast<uint32_t>(*f.m));
  if (f.lr) s->set_lr(*f.lr);
  if (f.l2) s->set_l2(*f.l2);
  if (f.schedule) {
    absl::StatusOr<v1::LrSchedule> schedule = ParseSchedule(*f.schedule);
    if (!schedule.ok()) return schedule.status();
    s->set_schedule(*schedule);
  }
  if (f.delta_buckets) s->set_delta_buckets(static_cast<uint32_t>(*f.delta_buckets));
  if (f.max_delta_buckets) s->set_max_delta_buckets(static_cast<uint32_t>(*f.max_delta_buckets));
  if (f.tau_low) s->set_tau_low(*f.tau_low);
  if (f.tau_high) s->set_tau_high(*f.tau_high);
  if (f.lambda_max) s->set_lambda_max(*f.lambda_max);
  if (f.rebuild_seconds) s->set_rebuild_seconds(*f.rebuild_seconds);
  if (f.margin) s->set_margin(*f.margin);
  if (f.inline_rebuild) s->set_inline_rebuild(true);
  return absl::OkStatus();
}

// Which parts the model gets: the SAU part unless --no-sau (with --spec-json: if the file has
// one or SAU flags are given); the LMU part with --lmu, any LMU flag, or an lmu in the file.
// Errors: INVALID_ARGUMENT for contradictory flags.
absl::Status ApplyFlags(const CreateFlags& f, v1::ModelSpec* spec) {
  if (f.name) spec->set_name(*f.name);
  if (f.shards) spec->set_shards(static_cast<uint32_t>(*f.shards));
  if (f.fuse || f.pattern || spec->has_fuse()) {
    // A fused model: the SAU and LMU flags set its own SAU and LMU.
    if (f.no_sau || f.lmu) {
      return absl::InvalidArgumentError(
          std::string(f.no_sau ? "--no-sau" : "--lmu") +
          " does not apply to --fuse: a fused model has its own SAU and LMU (set them with "
          "the SAU flags --d --r ... and the LMU flags --m --lr ...)");
    }
    v1::FuseSpec* fuse = spec->mutable_fuse();
    if (f.pattern) {
      absl::StatusOr<v1::FusePattern> pattern = ParsePattern(*f.pattern);
      if (!pattern.ok()) return pattern.status();
      fuse->set_pattern(*pattern);
    }
    if (absl::Status st = ApplySauFlags(f, fuse->mutable_sau()); !st.ok()) return st;
    return ApplyLmuFlags(f, fuse->mutable_lmu());
  }
  const bool lmu = f.lmu || f.AnyLmuFlag() || spec->has_lmu();
  if (f.no_sau) {
    if (f.AnySauFlag()) {
      return absl::InvalidArgumentError("--no-sau contradicts the SAU flags given (--d, --r, ...)");
    }
    if (!lmu) return absl::InvalidArgumentError("--no-sau needs --lmu: a model needs a part");
    spec->clear_sau();
  } else if (f.AnySauFlag() || !f.spec_json) {
    if (lmu && !spec->has_sau() && !f.AnySauFlag()) {
      return absl::InvalidArgumentError(
          "--lmu adds an LMU part to an SAU model: give --d, --dv and --r, or pass --no-sau "
          "for an LMU-only model");
    }
    if (absl::Status st = ApplySauFlags(f, spec->mutable_sau()); !st.ok()) return st;
  }
  if (lmu) return ApplyLmuFlags(f, spec->mutable_lmu());
  return absl::OkStatus();
}

}  // namespace

int RunCreate(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kCreateUsage);
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
  if (absl::Status s = ApplyFlags(flags, &spec); !s.ok()) return ReportError(s, kExitUsage);
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
