#include "client/cli/model_format.h"

#include <algorithm>

#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

std::string FeatureName(v1::FeatureKind kind) {
  switch (kind) {
    case v1::FEATURE_KIND_IID:
      return "iid";
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

}  // namespace

std::string DescribeModel(const v1::ModelInfo& info) {
  const v1::ModelSpec& spec = info.spec();
  const v1::SauSpec& s = spec.sau();
  std::string out = fmt::format("model {}\n", spec.name());
  auto row = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<13} {}\n", label, value);
  };
  row("shards", fmt::format("{}", spec.shards()));
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
  row("W digest", info.w_digest());
  row("state", fmt::format("{} per shard", Bytes(info.state_bytes())));
  out += fmt::format("  {:>5}  {:>9}  {:>12}  {:>12}  {}\n", "shard", "version", "events",
                     "last_t", "state digest");
  for (const v1::ShardInfo& sh : info.shards()) {
    out += fmt::format("  {:>5}  {:>9}  {:>12}  {:>12}  {}\n", sh.shard(), sh.ver_sau(),
                       sh.events(), sh.last_t(), sh.state_digest());
  }
  return out;
}

std::string ModelTable(const std::vector<v1::ModelInfo>& models) {
  if (models.empty()) return "no models\n";
  size_t name_width = 4;
  for (const v1::ModelInfo& m : models) name_width = std::max(name_width, m.spec().name().size());
  std::string out = fmt::format("{:<{}}  {:>6}  {:>5}  {:>5}  {:>6}  {:>7}  {:>7}  {:>17}  {:>10}  {:>8}  {}\n",
                                "name", name_width, "shards", "d", "d_v", "r", "tau", "gamma",
                                "clipping", "events", "version", "W digest");
  for (const v1::ModelInfo& m : models) {
    const v1::SauSpec& s = m.spec().sau();
    uint64_t version = 0;
    for (const v1::ShardInfo& sh : m.shards()) version = std::max(version, sh.ver_sau());
    out += fmt::format("{:<{}}  {:>6}  {:>5}  {:>5}  {:>6}  {:>7.4g}  {:>7.4g}  {:>17}  {:>10}  {:>8}  {}\n",
                       m.spec().name(), name_width, m.spec().shards(), s.d(), s.d_v(), s.r(),
                       s.tau(), s.gamma(), fmt::format("[{:.3g}, {:.3g}]", s.c_lo(), s.c_hi()),
                       TotalEvents(m), version, m.w_digest().substr(0, 16));
  }
  return out;
}

}  // namespace streamlearn::cli
