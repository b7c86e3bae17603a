#include "core/audit/regulation_rule.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/str_format.h"
#include "core/sau/regulator.h"

namespace streamlearn {
namespace {

using sau::Regulator;

// A regulation action the record names: its value, or nullopt when it names none.
struct Named {
  bool present = false;
  double value = 0;
  std::string cause;
};

struct NamedActions {
  Named raise_gamma, lower_gamma, raise_c_hi;
  std::string malformed;  // what is wrong with them, if anything
};

NamedActions ReadActions(const AuditRecord& body) {
  NamedActions out;
  const AuditValue* v = body.Find("actions");
  const AuditList* list = v == nullptr ? nullptr : v->get_if<AuditList>();
  if (list == nullptr) return out;  // none (a malformed list is the envelope rule's)
  for (const AuditValue& e : *list) {
    const AuditRecord* r = e.get_if<AuditRecord>();
    const AuditValue* a = r == nullptr ? nullptr : r->Find("action");
    const std::string* name = a == nullptr ? nullptr : a->get_if<std::string>();
    if (name == nullptr) continue;
    Named* slot = *name == "raise_gamma"   ? &out.raise_gamma
                  : *name == "lower_gamma" ? &out.lower_gamma
                  : *name == "raise_c_hi"  ? &out.raise_c_hi
                                           : nullptr;
    if (slot == nullptr) continue;
    const AuditValue* value = r->Find("value");
    const AuditValue* cause = r->Find("cause");
    if (slot->present || value == nullptr || !value->AsNumber(&slot->value) ||
        cause == nullptr || cause->get_if<std::string>() == nullptr) {
      out.malformed = absl::StrFormat(
          "the action %s must appear at most once, with a numeric \"value\" and a \"cause\"",
          *name);
      return out;
    }
    slot->present = true;
    slot->cause = *cause->get_if<std::string>();
  }
  return out;
}

bool Same(double got, double want) {
  return got == want || std::fabs(got - want) <= 1e-12 * std::fabs(want);
}

// The record's action against the recomputed one: both absent, or both present with the
// recomputed value and cause. `why` says why the recomputation acts (or not).
std::string Compare(std::string_view action, std::string_view cause, const Named& got,
                    bool want, double want_value, const std::string& why) {
  if (got.present && !want) {
    return absl::StrFormat("the record takes %s (value %.17g) but %s", action, got.value, why);
  }
  if (!got.present && want) {
    return absl::StrFormat("%s: the record takes no %s to %.17g", why, action, want_value);
  }
  if (!got.present) return "";
  if (got.cause != cause) {
    return absl::StrFormat("%s names cause \"%s\" where the rule's is \"%s\"", action, got.cause,
                           cause);
  }
  if (!Same(got.value, want_value)) {
    return absl::StrFormat("%s sets %.17g where %s gives %.17g", action, got.value, why,
                           want_value);
  }
  return "";
}

}  // namespace

RegulationRule::RegulationRule(const SauRuleParams& p)
    : p_(p), gamma_(p.gamma), c_hi_(p.c_hi) {}

std::string RegulationRule::Observe(const RegulationEvent& e, const AuditRecord& body) {
  // The median takes the den of every event after the first warm-up / 2, as the estimator's.
  if (e.n - 1 >= p_.median_start) median_.Push(e.den);
  const double median = median_.value();

  const NamedActions named = ReadActions(body);
  if (!named.malformed.empty()) return named.malformed;

  // (G1)-(G3): the window.
  bool raise = false, lower = false;
  std::string gamma_why = "regulate_gamma is off in the genesis spec";
  if (p_.regulate_gamma) {
    const bool thin = median > 0 && e.den < Regulator::kThinFrac * median;  // (G1)
    thin_ += thin ? 1 : 0;
    gamma_why = absl::StrFormat("event %d is not the end of a block of %d", e.n,
                                Regulator::kBlock);
    if (++block_events_ == Regulator::kBlock) {
      gamma_why = absl::StrFormat(
          "the block of %d events ending at event %d had %d thin events (den < %g median_den)",
          Regulator::kBlock, e.n, thin_, Regulator::kThinFrac);
      if (thin_ >= Regulator::kThinRaise) {
        healthy_blocks_ = 0;
        if (gamma_ < p_.gamma_max) {
          ++level_;
          raise = true;
          gamma_why += absl::StrFormat(", >= %d: level %d", Regulator::kThinRaise, level_);
        } else {
          gamma_why += absl::StrFormat(" but gamma is at gamma_max %.17g", p_.gamma_max);
        }
      } else if (thin_ == 0) {
        const uint64_t cooldown = static_cast<uint64_t>(Regulator::kCooldownBlocks)
                                  << std::min<uint64_t>(gamma_lowers_, 10);
        if (level_ > 0 && ++healthy_blocks_ >= cooldown) {
          healthy_blocks_ = 0;
          --level_;
          ++gamma_lowers_;
          lower = true;
          gamma_why += absl::StrFormat(", the %d-th healthy block in a row: level %d",
                                       cooldown, level_);
        } else {
          gamma_why += absl::StrFormat(" (level %d, %d of the %d healthy blocks of the cooldown)",
                                       level_, level_ > 0 ? healthy_blocks_ : 0, cooldown);
        }
      } else {
        healthy_blocks_ = 0;
      }
      block_events_ = 0;
      thin_ = 0;
    }
    if (raise || lower) {  // (G2)
      gamma_ = level_ == 0 ? p_.gamma
                           : std::min(p_.gamma_max, 1.0 - std::ldexp(1.0 - p_.gamma, -level_));
    }
  }
  if (std::string d = Compare("raise_gamma", "thin_denominators", named.raise_gamma, raise,
                              gamma_, gamma_why);
      !d.empty()) {
    return d;
  }
  if (std::string d = Compare("lower_gamma", "cooldown", named.lower_gamma, lower, gamma_,
                              gamma_why);
      !d.empty()) {
    return d;
  }

  // (K1): the clip level.
  std::string clip_why = "regulate_clip is off in the genesis spec";
  if (!p_.regulate_clip) {
    return Compare("raise_c_hi", "clip_rate", named.raise_c_hi, false, 0, clip_why);
  }
  if (e.clipped_hi.has_value()) {
    epoch_clipped_hi_ += *e.clipped_hi;
  } else {
    clip_counts_known_ = false;
  }
  epoch_features_ += static_cast<uint64_t>(p_.r);
  const double next = std::min(p_.c_hi_max, c_hi_ + p_.clip_step);
  if (!e.epoch_ending.has_value()) {
    // Where epochs end is not logged (fuse_learn): a raise must be one step, under the cap.
    if (named.raise_c_hi.present) {
      if (!(c_hi_ < p_.c_hi_max)) {
        return absl::StrFormat("raise_c_hi to %.17g but c_hi is at c_hi_max %.17g",
                               named.raise_c_hi.value, p_.c_hi_max);
      }
      if (std::string d = Compare("raise_c_hi", "clip_rate", named.raise_c_hi, true, next,
                                  "one step of the clip level");
          !d.empty()) {
        return d;
      }
      c_hi_ = next;
    }
    return "";
  }
  bool want = false;
  if (*e.epoch_ending) {
    const double rate =
        static_cast<double>(epoch_clipped_hi_) / static_cast<double>(epoch_features_);
    if (clip_counts_known_) {
      want = rate > Regulator::kClipTarget && c_hi_ < p_.c_hi_max;
      clip_why = absl::StrFormat(
          "the epoch ending at event %d clipped %d of its %d log-features above c_hi (%.4g%%, "
          "the rule acts above %g%%; c_hi %.17g, c_hi_max %.17g)",
          e.n, epoch_clipped_hi_, epoch_features_, 100 * rate, 100 * Regulator::kClipTarget,
          c_hi_, p_.c_hi_max);
    } else {
      // The records do not log upper clips (format < 3): whether the epoch called for a raise
      // is unknown; a raise it took must be one step under the cap.
      want = named.raise_c_hi.present;
      if (want && !(c_hi_ < p_.c_hi_max)) {
        return absl::StrFormat("raise_c_hi to %.17g but c_hi is at c_hi_max %.17g",
                               named.raise_c_hi.value, p_.c_hi_max);
      }
      clip_why = "one step of the clip level at an epoch's end";
    }
    epoch_clipped_hi_ = 0;
    epoch_features_ = 0;
    clip_counts_known_ = true;
  } else {
    clip_why = absl::StrFormat("no e-process epoch ends at event %d", e.n);
  }
  if (std::string d = Compare("raise_c_hi", "clip_rate", named.raise_c_hi, want, next, clip_why);
      !d.empty()) {
    return d;
  }
  if (want) c_hi_ = next;
  return "";
}

}  // namespace streamlearn
