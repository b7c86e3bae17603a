#include "core/fuse/fuse_snapshot.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/lmu/lmu_snapshot.h"
#include "core/sau/memory.h"

namespace streamlearn::fuse {

struct FuseSnapshotAccess {
  static std::string Serialize(const FuseUnit& u) {
    ByteWriter unit;
    unit.U8(static_cast<uint8_t>(u.spec_.pattern));
    unit.U64(u.steps_);
    unit.U8(u.has_last_t_ ? 1 : 0);
    unit.U64(u.last_t_);
    unit.F64(u.err_sau_);
    unit.F64(u.err_lmu_);
    unit.F64(u.diff2_);
    unit.F64(u.y_ms_);

    ByteWriter control;
    u.control_.Write(control);

    SnapshotBuilder b(kFuseSnapshotKind);
    b.AddSection(kFuseSectionUnit, unit.Take());
    b.AddSection(kFuseSectionSau, u.sau_.Serialize());  // prf: SerializeSauState's bytes
    b.AddSection(kFuseSectionMainLmu, lmu::SerializeLmu(*u.main_));
    b.AddSection(kFuseSectionGateLmu, lmu::SerializeLmu(*u.gate_));
    b.AddSection(kFuseSectionControl, control.Take());
    return b.Finish();
  }

  static absl::StatusOr<std::unique_ptr<FuseUnit>> Restore(const FuseSpec& raw,
                                                           const lmu::HashSecret& secret,
                                                           std::string_view bytes) {
    absl::StatusOr<FuseSpec> spec = ResolveFuseSpec(raw);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kFuseSnapshotKind);
    if (!c.ok()) return c.status();
    std::string_view sec[5];
    for (uint32_t tag = kFuseSectionUnit; tag <= kFuseSectionControl; ++tag) {
      absl::StatusOr<std::string_view> v = c->Section(tag);
      if (!v.ok()) return v.status();
      sec[tag - 1] = *v;
    }

    ByteReader ur(sec[0]);
    uint8_t pattern = 0, has_last = 0;
    uint64_t steps = 0, last_t = 0;
    double err_sau = 0, err_lmu = 0, diff2 = 0, y_ms = 0;
    absl::Status s = ur.U8(&pattern);
    if (s.ok()) s = ur.U64(&steps);
    if (s.ok()) s = ur.U8(&has_last);
    if (s.ok()) s = ur.U64(&last_t);
    if (s.ok()) s = ur.F64(&err_sau);
    if (s.ok()) s = ur.F64(&err_lmu);
    if (s.ok()) s = ur.F64(&diff2);
    if (s.ok()) s = ur.F64(&y_ms);
    if (s.ok()) s = ur.ExpectDone("fuse unit section");
    if (!s.ok()) return s;
    if (pattern != static_cast<uint8_t>(spec->pattern)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "fuse snapshot: pattern %d in the snapshot, %s in the spec", pattern,
          PatternName(spec->pattern)));
    }
    if (has_last > 1 || !(err_sau >= 0) || !(err_lmu >= 0) || !(diff2 >= 0) || !(y_ms >= 0) ||
        !std::isfinite(err_sau) || !std::isfinite(err_lmu) || !std::isfinite(diff2) ||
        !std::isfinite(y_ms)) {
      return absl::DataLossError("fuse snapshot: malformed unit section");
    }

    absl::StatusOr<sau::Memory> est = sau::RestoreMemory(spec->sau, sec[1]);
    if (!est.ok()) return est.status();
    absl::StatusOr<std::unique_ptr<lmu::LmuLearner>> main = lmu::RestoreLmu(spec->lmu, secret, sec[2]);
    if (!main.ok()) return main.status();
    absl::StatusOr<std::unique_ptr<lmu::LmuLearner>> gate =
        lmu::RestoreLmu(GateLmuSpec(*spec), secret, sec[3]);
    if (!gate.ok()) return gate.status();

    std::unique_ptr<FuseUnit> u(new FuseUnit(*spec, secret, *std::move(est)));
    u->main_ = *std::move(main);
    u->gate_ = *std::move(gate);
    ByteReader cr(sec[4]);
    if (s = u->control_.Read(cr); !s.ok()) return s;
    if (s = cr.ExpectDone("fuse control section"); !s.ok()) return s;
    u->steps_ = steps;
    u->has_last_t_ = has_last == 1;
    u->last_t_ = last_t;
    u->err_sau_ = err_sau;
    u->err_lmu_ = err_lmu;
    u->diff2_ = diff2;
    u->y_ms_ = y_ms;
    // The parts' snapshots carry the control inputs too; they must be the control plane's.
    const control::Controls want = u->control_.controls();
    // (The ridge and vla engines take no control input: docs/FUSE.md, "Other engines".)
    const sau::SauEstimator* prf = u->sau_.prf();
    if (!((prf == nullptr || (prf->lambda_nudge().factor == want.lambda.factor &&
                              prf->lambda_nudge().increment == want.lambda.increment)) &&
          u->main_->lr_scale() == want.lmu_lr_scale &&
          u->main_->tau_low_override() == want.lmu_tau_low)) {
      return absl::DataLossError(
          "fuse snapshot: the control inputs stored with the SAU and the LMU differ from the "
          "control plane's");
    }
    return u;
  }
};

std::string SerializeFuse(const FuseUnit& unit) { return FuseSnapshotAccess::Serialize(unit); }

absl::StatusOr<std::unique_ptr<FuseUnit>> RestoreFuse(const FuseSpec& spec,
                                                      const lmu::HashSecret& secret,
                                                      std::string_view bytes) {
  return FuseSnapshotAccess::Restore(spec, secret, bytes);
}

}  // namespace streamlearn::fuse
