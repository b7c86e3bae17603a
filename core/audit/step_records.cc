#include "core/audit/step_records.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/audit/canonical_writer.h"

namespace streamlearn {
namespace {

double MaxAbs(const std::vector<double>& xs) {
  double m = 0;
  for (double x : xs) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

std::string_view RjLevelName(sau::RjLevel level) {
  switch (level) {
    case sau::RjLevel::kGreen:
      return "green";
    case sau::RjLevel::kYellow:
      return "yellow";
    case sau::RjLevel::kRed:
      return "red";
  }
  return "green";
}

SauStateSummary SummarizeSau(const sau::Memory& mem) {
  SauStateSummary s;
  s.digest = mem.StateDigest();
  const sau::SauEstimator* prf = mem.prf();
  if (prf == nullptr) {
    s.engine = mem.Summary();
    return s;
  }
  const sau::SauState& st = prf->state();
  s.den_min = st.den_min;
  s.den_below_floor = st.den_below_floor;
  s.kahan_residual_max = std::max({MaxAbs(st.R_c), MaxAbs(st.s_c), MaxAbs(st.H_c)});
  return s;
}

namespace {

// The sau_event body of a ridge or vla event (keys in bytewise order).
void AppendEngineEventBody(const SauEventRecord& rec, std::string* out) {
  const sau::EventDiagnostics& d = *rec.diag;
  CanonicalObjectWriter w(out);
  if (rec.engine == sau::Engine::kRidge) {
    if (rec.batch_digest != nullptr) w.Hex("batch_digest", *rec.batch_digest);
    w.String("engine", sau::EngineName(rec.engine))
        .Double("key_norm2", d.ridge.key_norm2)
        .String("kind", kRecordSauEvent)
        .Uint("log_seq", rec.log_seq)
        .Double("scale", d.ridge.scale);
  } else {
    if (rec.state != nullptr) w.Double("a_norm", rec.state->engine.a_norm);
    w.Double("alpha_dot_k", d.vla.alpha_dot_k);
    if (rec.batch_digest != nullptr) w.Hex("batch_digest", *rec.batch_digest);
    w.String("engine", sau::EngineName(rec.engine))
        .String("kind", kRecordSauEvent)
        .Uint("log_seq", rec.log_seq)
        .Bool("refreshed", d.vla.refreshed)
        .Double("residual_norm", d.vla.residual_norm);
    if (rec.state != nullptr) w.Double("s_norm", rec.state->engine.s_norm);
    w.Bool("skipped", d.vla.skipped);
  }
  if (rec.state != nullptr) w.Hex("state_digest", rec.state->digest);
  w.Uint("t", rec.t).Uint("ver_sau", rec.ver_sau);
  w.End();
}

// The event's control actions as a canonical list: the floor raised by RJ red, and the
// self-regulation's (docs/SAU.md, "Self-regulation") with the value each sets; empty if none.
std::string SauEventActions(const sau::EventDiagnostics& d) {
  std::string list;
  const auto add = [&](std::string_view action, std::string_view cause, const double* to) {
    list.push_back(list.empty() ? '[' : ',');
    CanonicalObjectWriter a(&list);
    a.String("action", action).String("cause", cause);
    if (to != nullptr) a.Double("value", *to);
    a.End();
  };
  if (d.rj_level == sau::RjLevel::kRed) add("raise_beta_floor", "rj_red", nullptr);
  if (d.gamma_change > 0) add("raise_gamma", "thin_denominators", &d.gamma);
  if (d.gamma_change < 0) add("lower_gamma", "cooldown", &d.gamma);
  if (d.c_hi_raised) add("raise_c_hi", "clip_rate", &d.c_hi);
  if (!list.empty()) list.push_back(']');
  return list;
}

}  // namespace

void AppendSauEventBody(const SauEventRecord& rec, std::string* out) {
  if (rec.engine != sau::Engine::kPrf) {
    AppendEngineEventBody(rec, out);
    return;
  }
  const sau::EventDiagnostics& d = *rec.diag;
  const bool red = d.rj_level == sau::RjLevel::kRed;
  CanonicalObjectWriter w(out);
  // Keys in bytewise order.
  if (const std::string actions = SauEventActions(d); !actions.empty()) w.Raw("actions", actions);
  if (rec.batch_digest != nullptr) w.Hex("batch_digest", *rec.batch_digest);
  w.Double("beta_floor", d.beta_floor).Double("bprime_hat", d.bprime_hat);
  w.Double("clip_rate", d.clip_rate);
  // A saturation event (seed 000 sec. 15): the log-features clipped at this event.
  // Of them, those clipped above c_hi (record format 3): the clip level's rule (K1) counts
  // them, so that a verifier recomputes its raises.
  if (d.clipped > 0) w.Uint("clipped", static_cast<uint64_t>(d.clipped));
  if (d.clipped_hi > 0) w.Uint("clipped_hi", static_cast<uint64_t>(d.clipped_hi));
  w.Double("den", d.den);
  if (rec.state != nullptr) {
    w.Uint("den_below_floor", rec.state->den_below_floor).Double("den_min", rec.state->den_min);
  }
  w.Uint("epoch", d.epoch);
  if (rec.state != nullptr) w.Double("kahan_residual_max", rec.state->kahan_residual_max);
  w.String("kind", kRecordSauEvent)
      .Double("lambda_star", d.lambda_star)
      .Double("log_e_mix", d.log_e_mix)
      .Uint("log_seq", rec.log_seq)
      .Double("margin", d.margin)
      .Double("max_exponent", d.max_exponent);
  // The floor policy's input when it triggered (RJ red or an alarm), so that a verifier
  // recomputes the raised floor (docs/AUDIT.md, "What the verifier recomputes").
  if (red || d.alarm) w.Double("median_den", d.median_den);
  w.Double("nu2_hat", d.nu2_hat)
      .Bool("rj_exceeded", d.rj_gap > d.rj_threshold)  // what the estimator's window saw
      .Double("rj_gap", d.rj_gap)
      .Double("rj_gap_eq16", d.rj_gap_eq16)
      .String("rj_level", RjLevelName(d.rj_level))
      .Double("rj_threshold", d.rj_threshold)
      .Double("shr", d.shr);
  if (rec.state != nullptr) w.Hex("state_digest", rec.state->digest);
  w.Uint("t", rec.t).Uint("ver_sau", rec.ver_sau);
  w.End();
}

void AppendSauAlarmBody(uint64_t t, uint64_t log_seq, const sau::EventDiagnostics& diag,
                        std::string* out) {
  CanonicalObjectWriter w(out);
  w.Raw("actions",
        R"([{"action":"raise_beta_floor","cause":"alarm"},)"
        R"({"action":"restart_eprocess","cause":"alarm"}])")
      .Double("beta_floor", diag.beta_floor)
      .Uint("epoch_next", diag.epoch + 1)
      .String("kind", kRecordSauControl)
      .Uint("log_seq", log_seq)
      .Uint("t", t);
  w.End();
}

void AppendLmuUpdateBody(const LmuUpdateRecord& rec, std::string* out) {
  const lmu::LmuTableStats& ts = *rec.table;
  CanonicalObjectWriter w(out);
  w.Uint("applied", rec.applied)
      .Uint("base_keys", ts.base_keys)
      .Hex("batch_digest", *rec.batch_digest)
      .Int("c_insert_p100", rec.c_insert_p100)
      .Int("c_lookup_p100", rec.c_lookup_p100)
      .Uint("delta_keys", ts.delta_keys)
      .Double("delta_load", ts.delta_load)
      .Uint("duplicates", rec.duplicates)
      .Bool("emergency_used", ts.emergency_used)
      .Int("insert_bound", ts.insert_bound)
      .Uint("inserted", rec.inserted)
      .String("kind", kRecordLmuUpdate)
      .Int("locate_bound", ts.locate_bound)
      .Uint("log_seq", rec.log_seq)
      .Int("ring_used", ts.ring_used)
      .Int("stash_used", ts.stash_used);
  if (rec.state_digest != nullptr) w.Hex("state_digest", *rec.state_digest);
  w.Uint("t_first", rec.t_first).Uint("t_last", rec.t_last);
  w.Uint("ver_base", ts.ver_base).Uint("ver_delta", ts.ver_delta);
  w.End();
}

void AppendSnapshotBody(const SnapshotRecord& rec, std::string* out) {
  CanonicalObjectWriter w(out);
  w.Hex("blob_digest", rec.blob_digest)
      .String("kind", kRecordSnapshot)
      .Uint("log_seq", rec.log_seq)
      .String("part", rec.part)
      .Uint("snapshot_seq", rec.snapshot_seq)
      .Hex("state_digest", rec.state_digest)
      .Uint("steps", rec.steps);
  w.End();
}

}  // namespace streamlearn
