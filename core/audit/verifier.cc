#include "core/audit/verifier.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/audit/certificate.h"
#include "core/audit/checkpoint.h"
#include "core/audit/merkle_chain.h"

namespace streamlearn {
namespace {

constexpr int kRjWindow = 10;  // docs/SAU.md (39): last 10 steps
constexpr int kRjYellow = 3;
constexpr int kRjRed = 5;
constexpr uint32_t kRjMask = (1u << kRjWindow) - 1;

const std::string* GetString(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  return v == nullptr ? nullptr : v->get_if<std::string>();
}

// True iff body "actions" holds an entry with the given cause (and action, unless empty).
// Sets *malformed when "actions" is present but not a list of {action, cause} records.
bool HasAction(const AuditRecord& body, std::string_view action, std::string_view cause,
               bool* malformed) {
  const AuditValue* v = body.Find("actions");
  if (v == nullptr) return false;
  const AuditList* list = v->get_if<AuditList>();
  if (list == nullptr) {
    *malformed = true;
    return false;
  }
  for (const AuditValue& e : *list) {
    const AuditRecord* r = e.get_if<AuditRecord>();
    const std::string* a = r == nullptr ? nullptr : GetString(*r, "action");
    const std::string* c = r == nullptr ? nullptr : GetString(*r, "cause");
    if (a == nullptr || c == nullptr) {
      *malformed = true;
      return false;
    }
    if (*c == cause && (action.empty() || *a == action)) return true;
  }
  return false;
}

bool Num(const AuditRecord& r, std::string_view key, double* out) {
  const AuditValue* v = r.Find(key);
  return v != nullptr && v->AsNumber(out);
}

// got equals want up to 1e-12 of max(|want|, floor_scale).
bool Close(double got, double want, double floor_scale) {
  return got == want ||
         std::fabs(got - want) <= 1e-12 * std::max(std::fabs(want), floor_scale);
}

}  // namespace

std::string_view AuditRuleName(AuditRule rule) {
  switch (rule) {
    case AuditRule::kNone: return "none";
    case AuditRule::kParse: return "parse";
    case AuditRule::kEnvelope: return "envelope";
    case AuditRule::kIndex: return "index";
    case AuditRule::kChain: return "chain";
    case AuditRule::kGenesis: return "genesis";
    case AuditRule::kCheckpoint: return "checkpoint";
    case AuditRule::kSignature: return "signature";
    case AuditRule::kMargin: return "margin";
    case AuditRule::kRjWindow: return "rj_window";
    case AuditRule::kLmuProbe: return "lmu_probe";
    case AuditRule::kCertificate: return "certificate";
    case AuditRule::kRjThreshold: return "rj_threshold";
    case AuditRule::kEpoch: return "epoch";
    case AuditRule::kBetaFloor: return "beta_floor";
    case AuditRule::kSaturation: return "saturation";
    case AuditRule::kEngine: return "engine";
    case AuditRule::kRegulation: return "regulation";
  }
  return "unknown";
}

absl::Status AuditVerifier::Fail(uint64_t index, AuditRule rule, absl::string_view what) {
  bad_index_ = index;
  rule_ = rule;
  status_ = absl::DataLossError(absl::StrCat("audit record ", index, " breaks rule ",
                                             std::string(AuditRuleName(rule)), ": ", what));
  return status_;
}

absl::Status AuditVerifier::Feed(std::string_view line) {
  if (!status_.ok()) return status_;
  absl::StatusOr<AuditRecord> env = ParseAuditJson(line, opt_.parse);
  if (!env.ok()) return Fail(next_, AuditRule::kParse, env.status().message());
  return FeedEnvelope(*env);
}

absl::Status AuditVerifier::FeedEnvelope(const AuditRecord& envelope) {
  if (!status_.ok()) return status_;
  const uint64_t at = next_;
  const AuditValue* body_v = envelope.Find("body");
  const AuditRecord* body = body_v == nullptr ? nullptr : body_v->get_if<AuditRecord>();
  const AuditValue* index_v = envelope.Find("index");
  const std::string* prev_hex = GetString(envelope, "merkle_prev");
  const std::string* curr_hex = GetString(envelope, "merkle_curr");
  uint64_t index;
  Digest prev, curr;
  if (body == nullptr || index_v == nullptr || !index_v->AsUint64(&index) ||
      prev_hex == nullptr || curr_hex == nullptr || !ParseHexDigest(*prev_hex, &prev) ||
      !ParseHexDigest(*curr_hex, &curr)) {
    return Fail(at, AuditRule::kEnvelope,
                "envelope needs a record \"body\", an unsigned \"index\" and hex "
                "\"merkle_prev\"/\"merkle_curr\"");
  }
  if (index != at) {
    return Fail(at, AuditRule::kIndex,
                absl::StrCat("carries index ", index, " where ", at,
                             " is expected (a record was dropped, reordered or inserted)"));
  }
  if (prev != head_) {
    return Fail(at, AuditRule::kChain,
                absl::StrCat("merkle_prev ", *prev_hex, " is not the running head ",
                             ToHex(head_)));
  }
  absl::StatusOr<std::string> canon = EncodeCanonical(*body);
  if (!canon.ok()) return Fail(at, AuditRule::kEnvelope, canon.status().message());
  const Digest recomputed = MerkleStep(head_, *canon);
  if (recomputed != curr) {
    return Fail(at, AuditRule::kChain,
                absl::StrCat("SHA-256(merkle_prev || canonical(body)) = ", ToHex(recomputed),
                             " but the record claims merkle_curr ", *curr_hex,
                             " (the body was altered)"));
  }
  const Digest prev_head = head_;
  head_ = recomputed;
  absl::Status st = CheckBody(*body, prev_head);
  ++next_;
  return st;
}

absl::Status AuditVerifier::CheckBody(const AuditRecord& body, const Digest& prev_head) {
  const uint64_t at = next_;
  const std::string* kind = GetString(body, "kind");

  // genesis
  if (at == 0) {
    const std::string* spec = GetString(body, "model_spec");
    const std::string* w_hex = GetString(body, "w_digest");
    Digest w;
    if (kind == nullptr || *kind != kAuditKindGenesis || spec == nullptr || w_hex == nullptr ||
        !ParseHexDigest(*w_hex, &w)) {
      return Fail(at, AuditRule::kGenesis,
                  "record 0 must be {\"kind\":\"genesis\",\"model_spec\":...,\"w_digest\":hex}");
    }
    if (opt_.model_spec.has_value() && *opt_.model_spec != *spec) {
      return Fail(at, AuditRule::kGenesis,
                  absl::StrCat("model_spec \"", *spec, "\" is not the expected \"",
                               *opt_.model_spec, "\""));
    }
    if (opt_.w_digest.has_value() && *opt_.w_digest != w) {
      return Fail(at, AuditRule::kGenesis,
                  absl::StrCat("w_digest ", *w_hex, " is not the expected ",
                               ToHex(*opt_.w_digest)));
    }
    const std::string* model = GetString(body, "model");
    const AuditValue* shard_v = body.Find("shard");
    uint64_t shard = 0;
    const bool bound = model != nullptr && shard_v != nullptr && shard_v->AsUint64(&shard) &&
                       shard <= UINT32_MAX;
    if (bound) bound_ = ChainId{.model = *model, .shard = static_cast<uint32_t>(shard)};
    if (const AuditValue* f = body.Find("record_format"); f != nullptr) {
      uint64_t format = 0;
      if (!f->AsUint64(&format) || format < 2 || format > kAuditRecordFormat) {
        return Fail(at, AuditRule::kGenesis,
                    absl::StrFormat("record_format must be an integer in 2..%d (this verifier's "
                                    "newest; a chain of a later format needs a later verifier)",
                                    kAuditRecordFormat));
      }
      record_format_ = format;
    }
    if (absl::Status st = CheckGenesisSpec(*spec, bound); !st.ok()) return st;
    if (opt_.chain.has_value()) {
      if (!bound) {
        return Fail(at, AuditRule::kGenesis,
                    absl::StrCat("the genesis binds the chain to no (model, shard); expected "
                                 "model \"", opt_.chain->model, "\" shard ", opt_.chain->shard));
      }
      if (*model != opt_.chain->model || shard != opt_.chain->shard) {
        return Fail(at, AuditRule::kGenesis,
                    absl::StrCat("the chain belongs to model \"", *model, "\" shard ", shard,
                                 ", not model \"", opt_.chain->model, "\" shard ",
                                 opt_.chain->shard));
      }
    }
  } else if (kind != nullptr && *kind == kAuditKindGenesis) {
    return Fail(at, AuditRule::kGenesis, "a genesis record after record 0");
  }

  // checkpoints
  if (kind != nullptr && *kind == kAuditKindCheckpoint) {
    const AuditValue* cp_v = body.Find("checkpoint");
    const AuditRecord* cp = cp_v == nullptr ? nullptr : cp_v->get_if<AuditRecord>();
    const AuditValue* idx_v = cp == nullptr ? nullptr : cp->Find("index");
    const std::string* head_hex = cp == nullptr ? nullptr : GetString(*cp, "head");
    const std::string* sig_hex = cp == nullptr ? nullptr : GetString(*cp, "signature");
    const std::string* fp = cp == nullptr ? nullptr : GetString(*cp, "key_fingerprint");
    uint64_t idx;
    Digest head;
    std::string sig;
    if (idx_v == nullptr || !idx_v->AsUint64(&idx) || head_hex == nullptr ||
        !ParseHexDigest(*head_hex, &head) || sig_hex == nullptr || !HexDecode(*sig_hex, &sig) ||
        fp == nullptr) {
      return Fail(at, AuditRule::kCheckpoint,
                  "checkpoint needs \"index\", hex \"head\", hex \"signature\" and "
                  "\"key_fingerprint\"");
    }
    if (idx + 1 != at || head != prev_head) {
      return Fail(at, AuditRule::kCheckpoint,
                  absl::StrCat("checkpoint covers index ", idx, " head ", *head_hex,
                               " but the previous record is ", at - 1, " with head ",
                               ToHex(prev_head)));
    }
    if (opt_.public_key == nullptr) {
      return Fail(at, AuditRule::kSignature, "no public key configured to check checkpoints");
    }
    if (*fp != opt_.public_key->fingerprint()) {
      return Fail(at, AuditRule::kSignature,
                  absl::StrCat("signed by key ", *fp, ", expected key ",
                               opt_.public_key->fingerprint()));
    }
    if (!opt_.public_key->Verify(CheckpointMessage(idx, head), sig)) {
      return Fail(at, AuditRule::kSignature,
                  absl::StrCat("Ed25519 signature over (index ", idx, ", head ", *head_hex,
                               ") does not verify"));
    }
    since_checkpoint_ = 0;
    return absl::OkStatus();
  }
  if (opt_.checkpoint_every > 0 && since_checkpoint_ >= opt_.checkpoint_every) {
    return Fail(at, AuditRule::kCheckpoint,
                absl::StrCat("no checkpoint after ", since_checkpoint_,
                             " records (one is due every ", opt_.checkpoint_every, ")"));
  }
  ++since_checkpoint_;

  // margin: the record after a negative margin carries the alarm action.
  bool malformed = false;
  if (pending_alarm_) {
    const bool acted = HasAction(body, "", "alarm", &malformed);
    if (!acted) {
      return Fail(at, AuditRule::kMargin,
                  absl::StrFormat("record %d had margin %.17g < 0 but this record's actions "
                                  "carry no action with cause \"alarm\"",
                                  at - 1, pending_margin_));
    }
  }
  pending_alarm_ = false;
  if (const AuditValue* m = body.Find("margin")) {
    double margin;
    if (!m->AsNumber(&margin)) return Fail(at, AuditRule::kMargin, "\"margin\" is not a number");
    if (margin < 0) {
      pending_alarm_ = true;
      pending_margin_ = margin;
    }
  }

  // engine: a part's records name the engine its genesis spec gives (no name: prf), so that
  // no record escapes the prf rules below by naming another engine.
  if (kind != nullptr) {
    const std::optional<std::string>* want = *kind == "sau_event"    ? &rules_.sau_engine
                                             : *kind == "fuse_learn" ? &rules_.fuse_engine
                                                                     : nullptr;
    if (want != nullptr && want->has_value()) {
      const AuditValue* e = body.Find("engine");
      const std::string* named = e != nullptr ? e->get_if<std::string>() : nullptr;
      const std::string got = e == nullptr ? "prf" : named != nullptr ? *named : "(not a string)";
      if (got != **want) {
        return Fail(at, AuditRule::kEngine,
                    absl::StrFormat("a %s record names engine %s; the genesis spec's %s is %s",
                                    *kind, e == nullptr ? "none (prf)" : got,
                                    *kind == "sau_event" ? "sau.engine" : "fuse.sau.engine",
                                    **want));
      }
    }
  }
  // rules_.sau exists only for a prf genesis, and the engine rule above refused an event that
  // names another engine: every sau_event here is a prf one.
  const bool prf_event = rules_.sau.has_value() && kind != nullptr && *kind == "sau_event";
  if (prf_event) {
    ++sau_.events;
    if (absl::Status st = CheckSauThreshold(body, *rules_.sau, sau_.events); !st.ok()) return st;
  }
  if (rules_.fuse_sau.has_value() && kind != nullptr && *kind == "fuse_learn") {
    ++fuse_events_;
    if (absl::Status st = CheckSauThreshold(body, *rules_.fuse_sau, fuse_events_); !st.ok()) {
      return st;
    }
    double den = 0;
    if (!Num(body, "den", &den)) {
      return Fail(at, AuditRule::kRegulation,
                  "a fuse_learn record of a prf SAU needs a numeric \"den\"");
    }
    // The epochs and upper clips of a fused SAU are not logged.
    if (std::string why = fuse_regulation_->Observe({.n = fuse_events_,
                                                     .den = den,
                                                     .clipped_hi = std::nullopt,
                                                     .epoch_ending = std::nullopt},
                                                    body);
        !why.empty()) {
      return Fail(at, AuditRule::kRegulation, why);
    }
  }
  if (rules_.sau.has_value() && kind != nullptr && *kind == "sau_control") {
    if (absl::Status st = CheckSauControl(body); !st.ok()) return st;
  }

  // RJ window
  if (const AuditValue* e = body.Find("rj_exceeded")) {
    const bool* exceeded = e->get_if<bool>();
    if (exceeded == nullptr) return Fail(at, AuditRule::kRjWindow, "\"rj_exceeded\" is not a bool");
    // The flag follows from the gap and the threshold when the record carries them: a record
    // whose flag contradicts its own numbers is refused, not trusted.
    const AuditValue* gap_v = body.Find("rj_gap");
    const AuditValue* thr_v = body.Find("rj_threshold");
    double gap = 0, thr = 0;
    if (gap_v != nullptr && thr_v != nullptr) {
      if (!gap_v->AsNumber(&gap) || !thr_v->AsNumber(&thr)) {
        return Fail(at, AuditRule::kRjWindow, "\"rj_gap\" and \"rj_threshold\" must be numbers");
      }
      if (*exceeded != (gap > thr)) {
        return Fail(at, AuditRule::kRjWindow,
                    absl::StrFormat("rj_exceeded is %s but rj_gap %.17g %s rj_threshold %.17g",
                                    *exceeded ? "true" : "false", gap,
                                    gap > thr ? ">" : "<=", thr));
      }
    }
    rj_window_ = ((rj_window_ << 1) | (*exceeded ? 1u : 0u)) & kRjMask;
    const int count = std::popcount(rj_window_);
    if (count >= kRjRed && !HasAction(body, "raise_beta_floor", "rj_red", &malformed)) {
      return Fail(at, AuditRule::kRjWindow,
                  absl::StrCat(count, " of the last ", kRjWindow,
                               " RJ gaps exceeded the threshold (red) but the record's actions "
                               "carry no {\"action\":\"raise_beta_floor\",\"cause\":\"rj_red\"}"));
    }
  }
  if (const AuditValue* l = body.Find("rj_level")) {
    const int count = std::popcount(rj_window_);
    const std::string_view expected =
        count >= kRjRed ? "red" : (count >= kRjYellow ? "yellow" : "green");
    const std::string* level = l->get_if<std::string>();
    if (level == nullptr || *level != expected) {
      return Fail(at, AuditRule::kRjWindow,
                  absl::StrCat("rj_level is \"", level == nullptr ? "<not a string>" : *level,
                               "\" but ", count, " of the last ", kRjWindow,
                               " flags give \"", std::string(expected), "\""));
    }
  }
  if (malformed) {
    return Fail(at, AuditRule::kEnvelope,
                "\"actions\" must be a list of {\"action\":string,\"cause\":string}");
  }
  if (prf_event) {
    if (absl::Status st = CheckSauPolicy(body, std::popcount(rj_window_) >= kRjRed); !st.ok()) {
      return st;
    }
  }

  // LMU probe bounds
  for (const auto& [count_key, bound_key] :
       {std::pair<std::string_view, std::string_view>{"c_lookup_p100", "locate_bound"},
        std::pair<std::string_view, std::string_view>{"c_insert_p100", "insert_bound"}}) {
    const AuditValue* c = body.Find(count_key);
    if (c == nullptr) continue;
    const AuditValue* b = body.Find(bound_key);
    double cv, bv;
    if (b == nullptr || !c->AsNumber(&cv) || !b->AsNumber(&bv)) {
      return Fail(at, AuditRule::kLmuProbe,
                  absl::StrCat("\"", std::string(count_key), "\" needs a numeric \"",
                               std::string(bound_key), "\""));
    }
    if (rules_.lmu.has_value()) {
      const int spec_bound = count_key == "c_lookup_p100" ? rules_.lmu->locate_bound
                                                          : rules_.lmu->insert_bound;
      if (bv != spec_bound) {
        return Fail(at, AuditRule::kLmuProbe,
                    absl::StrFormat("%s = %g is not the bound %d that the genesis spec's delta "
                                    "table geometry gives",
                                    std::string(bound_key), bv, spec_bound));
      }
    }
    if (cv > bv) {
      return Fail(at, AuditRule::kLmuProbe,
                  absl::StrFormat("%s = %g exceeds %s = %g", std::string(count_key), cv,
                                  std::string(bound_key), bv));
    }
  }

  // certificate: in the body, or in the payload of a record appended by a client
  // (Auditor.Append stores {"kind":"append","payload":{...}}).
  const AuditRecord* holder = &body;
  for (int level = 0; level < 2 && holder != nullptr; ++level) {
    if (const AuditValue* c = holder->Find("certificate")) {
      const AuditRecord* cert = c->get_if<AuditRecord>();
      if (cert == nullptr) {
        return Fail(at, AuditRule::kCertificate, "\"certificate\" is not a record");
      }
      absl::Status st = CheckCertificateRecord(*cert);
      if (!st.ok()) return Fail(at, AuditRule::kCertificate, st.message());
    }
    const AuditValue* payload = level == 0 ? holder->Find("payload") : nullptr;
    holder = payload != nullptr ? payload->get_if<AuditRecord>() : nullptr;
  }
  return absl::OkStatus();
}

absl::Status AuditVerifier::CheckGenesisSpec(const std::string& model_spec,
                                             bool server_written) {
  absl::StatusOr<SpecRules> rules = SpecRulesFromModelSpec(model_spec);
  if (!rules.ok()) {
    // A chain a server wrote (its genesis names model and shard) always has a JSON spec;
    // without one there would be nothing to recompute the records against.
    if (server_written) return Fail(0, AuditRule::kGenesis, rules.status().message());
    return absl::OkStatus();
  }
  rules_ = *std::move(rules);
  if (rules_.sau.has_value()) {
    sau_.floor = rules_.sau->beta_floor;
    sau_.regulation.emplace(*rules_.sau);
  }
  if (rules_.fuse_sau.has_value()) fuse_regulation_.emplace(*rules_.fuse_sau);
  return absl::OkStatus();
}

absl::Status AuditVerifier::CheckSauThreshold(const AuditRecord& body, const SauRuleParams& p,
                                              uint64_t n) {
  const uint64_t at = next_;
  double thr = 0;
  if (!Num(body, "rj_threshold", &thr)) {
    return Fail(at, AuditRule::kRjThreshold, "the record needs a numeric \"rj_threshold\"");
  }
  const double want = RjThresholdAt(p, n);
  if (!Close(thr, want, 0.0)) {
    return Fail(at, AuditRule::kRjThreshold,
                absl::StrFormat("rj_threshold %.17g is not C_RJ sqrt(log(max(n, e)/delta)/r) = "
                                "%.17g at event n = %d (C_RJ %g, delta %g, r %d from the genesis)",
                                thr, want, n, p.c_rj, p.rj_delta, p.r));
  }
  return absl::OkStatus();
}

absl::Status AuditVerifier::CheckSauPolicy(const AuditRecord& body, bool red) {
  const uint64_t at = next_;
  const SauRuleParams& p = *rules_.sau;
  double margin = 0, log_e = 0, floor = 0;
  uint64_t epoch = 0;
  const AuditValue* epoch_v = body.Find("epoch");
  if (!Num(body, "margin", &margin) || !Num(body, "log_e_mix", &log_e) ||
      !Num(body, "beta_floor", &floor) || epoch_v == nullptr || !epoch_v->AsUint64(&epoch)) {
    return Fail(at, AuditRule::kMargin,
                "a prf sau_event needs numeric \"margin\", \"log_e_mix\", \"beta_floor\" and "
                "an unsigned \"epoch\"");
  }

  // epoch: the e-process tests from the event after the warm-up on (core/sau/mixture_eprocess.h).
  const bool tested = sau_.events > p.warmup;
  uint64_t want_epoch = sau_.epoch;
  if (tested) {
    if (sau_.epoch == 0 || sau_.restart_pending) {
      want_epoch = sau_.epoch + 1;
      sau_.epoch_events = 0;
    }
    ++sau_.epoch_events;
  }
  if (epoch != want_epoch) {
    return Fail(at, AuditRule::kEpoch,
                absl::StrFormat("epoch %d where %d follows (event %d; warm-up %d events; the "
                                "previous epoch %s)",
                                epoch, want_epoch, sau_.events, p.warmup,
                                sau_.restart_pending ? "had ended" : "had not ended"));
  }
  sau_.epoch = epoch;

  // margin
  const double want_margin = MarginOf(p, epoch, log_e);
  if (!Close(margin, want_margin, 1.0)) {
    return Fail(at, AuditRule::kMargin,
                absl::StrFormat("margin %.17g is not log(1/alpha_j) - log_e_mix = %.17g (alpha "
                                "%g, epoch j = %d, log_e_mix %.17g)",
                                margin, want_margin, p.alpha, epoch, log_e));
  }
  const bool alarm = tested && margin < 0;
  sau_.restart_pending =
      tested && (alarm || log_e < p.log_e_floor || sau_.epoch_events >= p.epoch_length);

  // regulation: the median of the logged denominators, then the self-regulating actions.
  double den = 0, clipped_hi = 0;
  if (!Num(body, "den", &den)) {
    return Fail(at, AuditRule::kRegulation, "a prf sau_event needs a numeric \"den\"");
  }
  std::optional<uint64_t> upper;
  if (record_format_ >= 3) {
    double clipped = 0;
    if (body.Find("clipped_hi") != nullptr &&
        (!Num(body, "clipped_hi", &clipped_hi) || clipped_hi < 1 ||
         clipped_hi != std::floor(clipped_hi) || !Num(body, "clipped", &clipped) ||
         clipped_hi > clipped)) {
      return Fail(at, AuditRule::kSaturation,
                  "\"clipped_hi\" must be an integer in 1..\"clipped\"");
    }
    upper = static_cast<uint64_t>(clipped_hi);
  }
  if (std::string why = sau_.regulation->Observe(
          {.n = sau_.events, .den = den, .clipped_hi = upper, .epoch_ending = sau_.restart_pending},
          body);
      !why.empty()) {
    return Fail(at, AuditRule::kRegulation, why);
  }

  // beta_floor
  double want_floor = sau_.floor;
  bool floor_bounded_only = false;
  if (red || alarm) {
    double median = 0;
    if (!Num(body, "median_den", &median)) {
      if (record_format_ >= 2) {
        return Fail(at, AuditRule::kBetaFloor,
                    "the floor policy triggered (RJ red or an alarm) but the record has no "
                    "numeric \"median_den\"");
      }
      // Format 1 did not log the policy's input: the floor it set is only bounded below.
      floor_bounded_only = true;
    } else if (!Close(median, sau_.regulation->median(), 0.0)) {
      return Fail(at, AuditRule::kBetaFloor,
                  absl::StrFormat("median_den %.17g is not the running median %.17g of the "
                                  "logged denominators",
                                  median, sau_.regulation->median()));
    }
    want_floor = std::max(2 * sau_.floor, p.red_floor_frac * median);
    if (median > 0) want_floor = std::min(want_floor, p.max_floor_frac * median);
    want_floor = std::max(want_floor, p.beta_floor);
    sau_.since_trigger = 0;
  } else {
    ++sau_.since_trigger;
    if (sau_.since_trigger > p.floor_cooldown) {
      want_floor = std::max(p.beta_floor, sau_.floor * p.floor_decay);
    }
  }
  if (floor_bounded_only ? !(floor >= p.beta_floor) : !Close(floor, want_floor, 0.0)) {
    return Fail(at, AuditRule::kBetaFloor,
                absl::StrFormat("beta_floor %.17g where the policy gives %.17g (previous floor "
                                "%.17g, %s)",
                                floor, want_floor, sau_.floor,
                                red || alarm ? "set on a trigger"
                                             : absl::StrFormat("%d events since a trigger",
                                                               sau_.since_trigger)));
  }
  sau_.floor = floor;

  // saturation: the cumulative clip rate follows from the events' clipped counts.
  double clip_rate = 0, max_exp = 0, clipped = 0;
  if (!Num(body, "clip_rate", &clip_rate) || !Num(body, "max_exponent", &max_exp)) {
    return Fail(at, AuditRule::kSaturation,
                "a prf sau_event needs numeric \"clip_rate\" and \"max_exponent\"");
  }
  if (body.Find("clipped") != nullptr &&
      (!Num(body, "clipped", &clipped) || clipped < 1 || clipped > p.r ||
       clipped != std::floor(clipped))) {
    return Fail(at, AuditRule::kSaturation,
                absl::StrFormat("\"clipped\" must be an integer in 1..r = %d", p.r));
  }
  sau_.clipped += static_cast<uint64_t>(clipped);
  const double want_rate = static_cast<double>(sau_.clipped) /
                           static_cast<double>(sau_.events * static_cast<uint64_t>(p.r));
  if (record_format_ < 2) {
    // Format 1 did not log the events' clipped counts: the rate is only a fraction.
    if (!(clip_rate >= 0 && clip_rate <= 1)) {
      return Fail(at, AuditRule::kSaturation,
                  absl::StrFormat("clip_rate %.17g is not a fraction in [0, 1]", clip_rate));
    }
  } else if (!Close(clip_rate, want_rate, 0.0)) {
    return Fail(at, AuditRule::kSaturation,
                absl::StrFormat("clip_rate %.17g is not the %d clipped log-features logged so "
                                "far over %d events of r = %d (%.17g)",
                                clip_rate, sau_.clipped, sau_.events, p.r, want_rate));
  }
  if (max_exp < sau_.max_exponent) {
    return Fail(at, AuditRule::kSaturation,
                absl::StrFormat("max_exponent %.17g fell below the earlier maximum %.17g",
                                max_exp, sau_.max_exponent));
  }
  sau_.max_exponent = max_exp;
  return absl::OkStatus();
}

absl::Status AuditVerifier::CheckSauControl(const AuditRecord& body) {
  const uint64_t at = next_;
  double floor = 0;
  const AuditValue* next_v = body.Find("epoch_next");
  uint64_t epoch_next = 0;
  if (Num(body, "beta_floor", &floor) && floor != sau_.floor) {
    return Fail(at, AuditRule::kBetaFloor,
                absl::StrFormat("the control record's beta_floor %.17g is not the floor %.17g "
                                "of the event before it",
                                floor, sau_.floor));
  }
  if (next_v != nullptr && (!next_v->AsUint64(&epoch_next) || epoch_next != sau_.epoch + 1 ||
                            !sau_.restart_pending)) {
    return Fail(at, AuditRule::kEpoch,
                absl::StrFormat("epoch_next is %s but the event before it %s epoch %d",
                                next_v->AsUint64(&epoch_next) ? absl::StrCat(epoch_next)
                                                              : std::string("not a number"),
                                sau_.restart_pending ? "ended" : "did not end", sau_.epoch));
  }
  return absl::OkStatus();
}

absl::Status AuditVerifier::Finish() {
  if (!status_.ok()) return status_;
  if (next_ == 0) {
    return Fail(0, AuditRule::kGenesis, "the chain is empty: there is no genesis record");
  }
  if (pending_alarm_) {
    return Fail(next_, AuditRule::kMargin,
                absl::StrFormat("the stream ends after record %d with margin %.17g < 0 and no "
                                "following alarm action",
                                next_ - 1, pending_margin_));
  }
  return absl::OkStatus();
}

}  // namespace streamlearn
