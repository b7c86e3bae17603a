#include "client/demo/report.h"

#include <algorithm>

#include "core/sau/exact_attention.h"
#include "fmt/format.h"

namespace streamlearn::demo {
namespace {

const char* RjName(int level) {
  switch (level) {
    case 1:
      return "YELLOW";
    case 2:
      return "RED";
    default:
      return "GREEN";
  }
}

std::string Pair(const std::vector<double>& y) {
  return fmt::format("({:7.3f},{:7.3f})", y.size() > 0 ? y[0] : 0.0, y.size() > 1 ? y[1] : 0.0);
}

}  // namespace

void Report::ErrorStats::Add(double e) {
  ++n;
  sum += e;
  max = std::max(max, e);
}

void Report::Row(const CheckpointRow& row) {
  const double err_c = sau::RelativeError(row.y_correctness, row.y_exact);
  const double err_s = sau::RelativeError(row.y_stabilized, row.y_exact);
  errors_[row.phase_c][0].Add(err_c);
  errors_[row.phase_c][1].Add(err_s);
  if (quiet_) return;
  if (!header_printed_) {
    out_ << fmt::format("{:>7} {:<7} {:<17} {:<17} {:<17} {:>8} {:>8} {:>8} {:<6} {:>9} {:>9} {:>6}\n",
                        "t", "phase", "SAU correctness", "SAU stabilized", "exact", "err corr",
                        "err stab", "margin", "RJ", "beta_flr", "lambda*", "clip%");
    header_printed_ = true;
  }
  const std::string phase =
      row.phase_c ? fmt::format("C:{}{}", row.cluster, row.drift ? " *" : "") : "A";
  out_ << fmt::format("{:>7} {:<7} {:<17} {:<17} {:<17} {:>8.4f} {:>8.4f} {:>8.3f} {:<6} {:>9.3g} {:>9.3g} {:>6.3f}\n",
                      row.t, phase, Pair(row.y_correctness), Pair(row.y_stabilized),
                      Pair(row.y_exact), err_c, err_s, row.diag.margin(),
                      RjName(static_cast<int>(row.diag.rj_level())), row.diag.beta_floor(),
                      row.diag.lambda_star(), 100.0 * row.diag.clip_rate());
}

void Report::Summary(const RunTotals& totals) const {
  const IngestStats& st = totals.stats;
  const AckMonitor::Snapshot& a = totals.acks;
  if (!quiet_ && header_printed_) {
    out_ << "(* = the active DGP-C cluster changed since the previous row: a drift moment)\n";
  }
  out_ << fmt::format(
      "summary: {} events in {} batches, {} applied, {} duplicates, {} batches rejected, "
      "{:.2f} s ({:.0f} events/s)\n",
      st.events_sent, st.batches_sent, st.events_applied, st.duplicates, st.batches_rejected,
      totals.seconds, totals.seconds > 0 ? st.events_applied / totals.seconds : 0.0);
  const char* phase_names[2] = {"A (DGP-A)", "C (DGP-C drift)"};
  for (int p = 0; p < 2; ++p) {
    const ErrorStats& c = errors_[p][0];
    const ErrorStats& s = errors_[p][1];
    if (c.n == 0) continue;
    out_ << fmt::format(
        "  phase {:<16} relative error vs exact: correctness mean {:.4f} max {:.4f}; "
        "stabilized mean {:.4f} max {:.4f} ({} checkpoints)\n",
        phase_names[p], c.sum / c.n, c.max, s.sum / s.n, s.max, c.n);
  }
  if (a.has_last) {
    out_ << fmt::format(
        "  health: final margin {:.3f} (min {:.3f}), {} alarm(s), worst RJ {}, beta_floor max "
        "{:.3g}, lambda* max {:.3g}, clip rate {:.3f}%\n",
        a.last.margin(), a.min_margin, a.alarms, RjName(a.max_rj_level), a.max_beta_floor,
        a.max_lambda_star, 100.0 * a.last.clip_rate());
  }
  out_ << fmt::format("  final version {} (shard {})\n", a.version, a.shard);
}

}  // namespace streamlearn::demo
