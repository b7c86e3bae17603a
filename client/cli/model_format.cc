#include "client/cli/model_format.h"

#include <algorithm>
#include <map>

#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

std::string FeatureName(v1::FeatureKind kind) {
  switch (kind) {
    case v1::FEATURE_KIND_IID:
      return "iid";
    case v1::FEATURE_KIND_SRHT:
      return "srht";
    case v1::FEATURE_KIND_ORTHOGONAL:
    case v1::FEATURE_KIND_UNSPECIFIED:
    default:
      return "orthogonal";
  }
}

std::string InputName(const v1::SauSpec& s) {
  if (s.input_mode() == v1::INPUT_MODE_RAW) return "raw (used as given)";
  return fmt::format("L2-normalised, scaled by input_scale a={:g}", s.input_scale());
}

std::string Bytes(uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < 1024 * 1024) return fmt::format("{:.1f} KiB", n / 1024.0);
  return fmt::format("{:.1f} MiB", n / (1024.0 * 1024.0));
}

uint64_t TotalEvents(const v1::ModelInfo& info) {
  uint64_t n = 0;
  for (const v1::ShardInfo& s : info.shards()) n += s.events();
  return n;
}

// "sau" for the prf engine, "sau:ridge" / "sau:vla" for the others (docs/ENGINES.md).
std::string SauName(const v1::SauSpec& s) {
  switch (s.engine()) {
    case v1::ENGINE_RIDGE:
      return "sau:ridge";
    case v1::ENGINE_VLA:
      return "sau:vla";
    default:
      return "sau";
  }
}

std::string PartsName(const v1::ModelSpec& spec) {
  if (spec.has_fuse()) return "fuse";
  if (spec.has_sau() && spec.has_lmu()) return SauName(spec.sau()) + "+lmu";
  return spec.has_lmu() ? "lmu" : SauName(spec.sau());
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

// The SAU part's shards: version, events, last t and state digest, a row each.
std::string SauShardTable(const v1::ModelInfo& info) {
  std::string out = fmt::format("  {:>5}  {:>9}  {:>12}  {:>12}  {}\n", "shard", "version",
                                "events", "last_t", "state digest");
  for (const v1::ShardInfo& sh : info.shards()) {
    out += fmt::format("  {:>5}  {:>9}  {:>12}  {:>12}  {}\n", sh.shard(), sh.ver_sau(),
                       sh.events(), sh.last_t(), sh.state_digest());
  }
  // The self-regulation's state per shard, when a switch is on (docs/SAU.md).
  const v1::SauSpec& s = info.spec().sau();
  if (s.regulate_gamma() || s.regulate_clip()) {
    out += fmt::format("  {:>5}  {:>9}  {:>18}  {:>9}  {:>9}\n", "shard", "gamma",
                       "widened/stepped", "c_hi", "raised");
    for (const v1::ShardInfo& sh : info.shards()) {
      out += fmt::format("  {:>5}  {:>9.6g}  {:>18}  {:>9.4g}  {:>9}\n", sh.shard(), sh.gamma(),
                         fmt::format("{}/{}", sh.gamma_raises(), sh.gamma_lowers()), sh.c_hi(),
                         sh.c_hi_raises());
    }
  }
  return out;
}

// The self-regulating actions a prf spec switches on (docs/SAU.md, "Self-regulation").
std::string RegulationDescription(const v1::SauSpec& s) {
  if (!s.regulate_gamma() && !s.regulate_clip()) return "off (gamma and c_hi stay as set)";
  std::string out;
  if (s.regulate_gamma()) {
    out = fmt::format("gamma up to {:g} while denominators are thin", s.gamma_max());
  }
  if (s.regulate_clip()) {
    out += fmt::format("{}c_hi up to {:g} while > 1% clipped", out.empty() ? "" : "; ",
                       s.c_hi_max());
  }
  return out;
}

// The LMU spec and, per shard, its table (the LmuShardInfo fields of docs/LMU_API.md).
std::string DescribeLmu(const v1::ModelInfo& info) {
  const v1::LmuSpec& l = info.spec().lmu();
  const uint64_t capacity = static_cast<uint64_t>(l.delta_buckets()) * l.bucket_size();
  std::string out;
  auto row = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<13} {}\n", label, value);
  };
  row("lmu", fmt::format("m={}  lr={:g} ({})  l2={:g}", l.m(), l.lr(),
                         l.schedule() == v1::LR_SCHEDULE_INVERSE_SQRT ? "inverse-sqrt"
                                                                      : "constant",
                         l.l2()));
  const std::string growth =
      l.max_delta_buckets() > l.delta_buckets()
          ? fmt::format("grows to {} buckets under pressure", l.max_delta_buckets())
          : std::string("never grows");
  row("lmu delta",
      fmt::format("C={} ({} buckets x b={}, {})  stash S={}  relocations L={}  ring Q={}",
                  capacity, l.delta_buckets(), l.bucket_size(), growth, l.stash(),
                  l.max_relocations(), l.ring()));
  row("lmu rebuild",
      fmt::format("tau_low={:g}  tau_high={:g}  lambda_max={:g}/s  T_rb={:g} s  margin={:g}  ({})",
                  l.tau_low(), l.tau_high(), l.lambda_max(), l.rebuild_seconds(), l.margin(),
                  l.inline_rebuild() ? "inline" : "background"));
  for (const v1::LmuShardInfo& sh : info.lmu_shards()) {
    // The shard's delta, grown or not (a server before growth existed reports 0 buckets).
    const uint64_t shard_capacity =
        sh.delta_buckets() > 0 ? uint64_t{sh.delta_buckets()} * l.bucket_size() : capacity;
    out += fmt::format("  lmu shard {:<3} samples {}  last_t {}  ver_base {}  ver_delta {}\n",
                       sh.shard(), sh.samples(), sh.last_t(), sh.ver_base(), sh.ver_delta());
    out += fmt::format(
        "                keys base {}  delta {}  (delta load {:.3f} of C={})  ring {}/{}  "
        "stash {}/{}  emergency {}  frozen {}\n",
        sh.base_keys(), sh.delta_keys(), sh.delta_load(), shard_capacity, sh.ring_used(), l.ring(),
        sh.stash_used(), l.stash(), YesNo(sh.emergency_used()), YesNo(sh.frozen()));
    out += fmt::format(
        "                rebuilds {}  T_rb last {:.4g} s  max {:.4g} s  probes locate {} "
        "(bound {})  insert {} (bound {})  tripwires {}  tau_high crossings {}  delta growths "
        "{}\n",
        sh.rebuilds(), sh.last_rebuild_seconds(), sh.max_rebuild_seconds(),
        sh.max_locate_probes(), sh.locate_bound(), sh.max_insert_probes(), sh.insert_bound(),
        sh.tripwires(), sh.tau_high_crossings(), sh.delta_growths());
    out += fmt::format("                state digest {}\n", sh.state_digest());
  }
  return out;
}

std::string PatternName(v1::FusePattern p) {
  switch (p) {
    case v1::FUSE_PATTERN_ATTENTION_AS_FEATURE:
      return "attention_as_feature";
    case v1::FUSE_PATTERN_LINEAR_AS_GATE:
      return "linear_as_gate";
    case v1::FUSE_PATTERN_META_LINEAR:
    default:
      return "meta_linear";
  }
}

// A ridge or vla engine and its parameters.
std::string EngineDescription(const v1::SauSpec& s) {
  if (s.engine() == v1::ENGINE_RIDGE) {
    return fmt::format("ridge recall: gamma={:g}  eps={:g} (x max |k|^2)  filter K={}",
                       s.ridge().gamma(), s.ridge().eps(), s.ridge().filter_order());
  }
  return fmt::format("vla: lambda0={:g}  refresh every {} writes (+{:g} I)  key_eps={:g}",
                     s.vla().lambda0(), s.vla().refresh_period(), s.vla().refresh_eta(),
                     s.vla().key_eps());
}

// The fuse part: its pattern, its SAU and LMU in short, the gate and control settings, and per
// shard: steps, versions, control actions, the controls in force, state digest.
std::string DescribeFuse(const v1::ModelInfo& info) {
  const v1::FuseSpec& f = info.spec().fuse();
  const v1::SauSpec& s = f.sau();
  const v1::LmuSpec& l = f.lmu();
  const v1::GateSpec& g = f.gate();
  const v1::ControlSpec& c = f.control();
  std::string out;
  auto row = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<13} {}\n", label, value);
  };
  row("pattern", PatternName(f.pattern()) + (f.low_rank() ? " (low-rank SAU readout)" : ""));
  const bool prf = s.engine() == v1::ENGINE_PRF;
  if (prf) {
    row("fuse sau", fmt::format("d={}  m=d_v={}  r={}  r_v={}  tau={:g}  gamma={:g}  {}, seed {}",
                                s.d(), s.d_v(), s.r(), s.r_v(), s.tau(), s.gamma(),
                                FeatureName(s.features()), s.seed()));
  } else {
    row("fuse sau", fmt::format("d={}  m=d_v={}  {}", s.d(), s.d_v(), EngineDescription(s)));
  }
  row("fuse lmu", fmt::format("m={}  lr={:g}  l2={:g}  C={}  tau_low={:g}  tau_high={:g}  ({})",
                              l.m(), l.lr(), l.l2(),
                              static_cast<uint64_t>(l.delta_buckets()) * l.bucket_size(),
                              l.tau_low(), l.tau_high(),
                              l.inline_rebuild() ? "inline" : "background"));
  row("gate", fmt::format("lr={:g}  l2={:g}  error_rate={:g}  scale_rate={:g}", g.lr(), g.l2(),
                          g.error_rate(), g.scale_rate()));
  row("control", fmt::format("gate in [{:g}, {:g}]  alarm clamp {:g}  den clamp {:g}  window {}  "
                             "recovery {:g}",
                             c.g_min(), c.g_max(), c.alarm_g_max(), c.den_g_max(),
                             c.clamp_window(), c.recovery_rate()));
  row("", fmt::format("lambda x{:g} (max x{:g}), +{:g} median den; warn after {} steps or margin "
                      "< {:g}: tau_low {:g}, lr x{:g} for {} steps",
                      c.lambda_factor(), c.lambda_factor_max(), c.den_lambda_frac(),
                      c.warn_persist(), c.margin_thin(), c.warn_tau_low(), c.warn_lr_scale(),
                      c.warn_window()));
  if (prf) {
    row("W digest", info.w_digest());
  } else {
    row("", "idle over this engine: the control plane reads the prf estimator's health "
            "(docs/FUSE.md)");
  }
  for (const v1::FuseShardInfo& sh : info.fuse_shards()) {
    out += fmt::format(
        "  fuse shard {:<3} steps {}  last_t {}  log_seq {}  ver_sau {}  ver_base {}  "
        "ver_delta {}  delta load {:.3f}\n",
        sh.shard(), sh.steps(), sh.last_t(), sh.log_seq(), sh.ver_sau(), sh.ver_base(),
        sh.ver_delta(), sh.delta_load());
    out += fmt::format("                control actions {}  gate clamp {:g}  lmu lr x{:g}  "
                       "tau_low {:g}\n",
                       sh.actions(), sh.g_max(), sh.lmu_lr_scale(), sh.lmu_tau_low());
    out += fmt::format("                state digest {}\n", sh.state_digest());
  }
  return out;
}

}  // namespace

std::string DescribeModel(const v1::ModelInfo& info) {
  const v1::ModelSpec& spec = info.spec();
  std::string out = fmt::format("model {}\n", spec.name());
  auto row = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<13} {}\n", label, value);
  };
  row("shards", fmt::format("{}", spec.shards()));
  row("parts", PartsName(spec));
  if (spec.has_sau() && spec.sau().engine() != v1::ENGINE_PRF) {
    const v1::SauSpec& s = spec.sau();
    row("dimensions", fmt::format("d={}  d_v={}", s.d(), s.d_v()));
    row("engine", EngineDescription(s));
    row("state", fmt::format("{} per shard", Bytes(info.state_bytes())));
    out += SauShardTable(info);
  } else if (spec.has_sau()) {
    const v1::SauSpec& s = spec.sau();
    row("dimensions", fmt::format("d={}  d_v={}  r={}  r_v={}", s.d(), s.d_v(), s.r(),
                                  s.r_v() == 0 ? std::string("off") : std::to_string(s.r_v())));
    row("features", fmt::format("{}{}, seed {}", FeatureName(s.features()),
                                s.antithetic() ? ", antithetic" : "", s.seed()));
    row("kernel", fmt::format("tau={:g}  gamma={:g}  (effective memory {:g} events)", s.tau(),
                              s.gamma(), s.gamma() < 1 ? 1.0 / (1.0 - s.gamma()) : 0.0));
    row("inputs", InputName(s));
    row("clipping", fmt::format("log-features clipped to [{:g}, {:g}]", s.c_lo(), s.c_hi()));
    row("whitening", fmt::format("beta_mu={:g}  beta_sigma={:g}", s.beta_mu(), s.beta_sigma()));
    row("e-process", fmt::format("alpha={:g}  kappa={:g}", s.alpha(), s.kappa()));
    row("RJ", fmt::format("c_rj={:g}  delta={:g}", s.c_rj(), s.rj_delta()));
    row("beta_floor", fmt::format("{:g}", s.beta_floor()));
    row("regulation", RegulationDescription(s));
    row("exact window",
        s.exact_window() == 0
            ? std::string("off")
            : fmt::format("the last {} events answer a query whose denominator is thin",
                          s.exact_window()));
    row("W digest", info.w_digest());
    row("state", fmt::format("{} per shard", Bytes(info.state_bytes())));
    out += SauShardTable(info);
  }
  if (spec.has_lmu()) out += DescribeLmu(info);
  if (spec.has_fuse()) out += DescribeFuse(info);
  return out;
}

std::string ModelTable(const std::vector<v1::ModelInfo>& models) {
  if (models.empty()) return "no models\n";
  size_t name_width = 4;
  for (const v1::ModelInfo& m : models) name_width = std::max(name_width, m.spec().name().size());
  static constexpr char kRow[] =
      "{:<{}}  {:>9}  {:>6}  {:>5}  {:>5}  {:>6}  {:>7}  {:>7}  {:>17}  {:>10}  {:>8}  {:>10}  "
      "{:>8}  {}\n";
  std::string out = fmt::format(kRow, "name", name_width, "parts", "shards", "d", "d_v", "r",
                                "tau", "gamma", "clipping", "events", "version", "samples",
                                "ver_base", "W digest");
  for (const v1::ModelInfo& m : models) {
    const bool sau = m.spec().has_sau();
    const v1::SauSpec& s = m.spec().sau();
    auto sau_field = [sau](const std::string& value) { return sau ? value : std::string("-"); };
    // The random-feature columns are the prf engine's alone.
    const bool prf = sau && s.engine() == v1::ENGINE_PRF;
    auto prf_field = [prf](const std::string& value) { return prf ? value : std::string("-"); };
    uint64_t version = 0, samples = 0, ver_base = 0;
    for (const v1::ShardInfo& sh : m.shards()) version = std::max(version, sh.ver_sau());
    for (const v1::LmuShardInfo& sh : m.lmu_shards()) {
      samples += sh.samples();
      ver_base = std::max(ver_base, sh.ver_base());
    }
    const bool lmu = m.spec().has_lmu();
    out += fmt::format(
        kRow, m.spec().name(), name_width, PartsName(m.spec()), m.spec().shards(),
        sau_field(std::to_string(s.d())), sau_field(std::to_string(s.d_v())),
        prf_field(std::to_string(s.r())), prf_field(fmt::format("{:.4g}", s.tau())),
        prf_field(fmt::format("{:.4g}", s.gamma())),
        prf_field(fmt::format("[{:.3g}, {:.3g}]", s.c_lo(), s.c_hi())),
        sau_field(std::to_string(TotalEvents(m))), sau_field(std::to_string(version)),
        lmu ? std::to_string(samples) : "-", lmu ? std::to_string(ver_base) : "-",
        prf ? m.w_digest().substr(0, 16) : "-");
  }
  return out;
}

std::string DescribeShardMap(const v1::ShardMapResponse& map) {
  std::string out;
  if (map.cluster()) {
    out = fmt::format("cluster mode; answered by server '{}'\n", map.server_id());
  } else {
    out = "embedded mode: this server serves every shard\n";
  }
  if (map.shards().empty()) return out + "no shards\n";
  size_t model_width = 5, owner_width = 5, address_width = 7;
  for (const v1::ShardOwner& o : map.shards()) {
    model_width = std::max(model_width, o.model().size());
    owner_width = std::max(owner_width, o.owner().size());
    address_width = std::max(address_width, o.address().size());
  }
  out += fmt::format("  {:<{}}  {:>5}  {:<{}}  {:<{}}  {:>5}\n", "model", model_width, "shard",
                     "owner", owner_width, "address", address_width, "epoch");
  std::map<std::string, size_t> per_owner;
  size_t unserved = 0;
  for (const v1::ShardOwner& o : map.shards()) {
    const bool known = !map.cluster() || !o.owner().empty();
    const std::string owner = !map.cluster() ? "(here)" : known ? o.owner() : "-";
    const std::string address = !map.cluster() || !known ? "-" : o.address();
    const std::string epoch = !map.cluster() || !known ? "-" : fmt::format("{}", o.epoch());
    out += fmt::format("{} {:<{}}  {:>5}  {:<{}}  {:<{}}  {:>5}\n", o.here() ? "*" : " ",
                       o.model(), model_width, o.shard(), owner, owner_width, address,
                       address_width, epoch);
    if (known) {
      ++per_owner[owner];
    } else {
      ++unserved;
    }
  }
  if (map.cluster()) {
    out += "shards per server:";
    for (const auto& [owner, n] : per_owner) out += fmt::format(" {}={}", owner, n);
    if (unserved > 0) out += fmt::format(" (none: {}, a takeover is under way)", unserved);
    out += "\n";
  }
  return out;
}

}  // namespace streamlearn::cli
