// Report: the demo's table (one row per checkpoint) and its closing summary.
//
// A row sets the server's SAU estimate at the probe query (correctness path, docs/SAU.md (19),
// and stabilized path, (20)-(21)) beside the exact decayed attention computed client-side,
// with their relative errors and the write path's health signals from the newest ack.
//
//   Report report(std::cout, /*quiet=*/false);
//   report.Row(row);            // prints the header first
//   report.Summary(totals);
//
// Thread safety: none.
#ifndef STREAMLEARN_CLIENT_DEMO_REPORT_H_
#define STREAMLEARN_CLIENT_DEMO_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "client/demo/ack_monitor.h"
#include "client/lib/ingest_session.h"

namespace streamlearn::demo {

struct CheckpointRow {
  uint64_t events = 0;     // events of this run applied so far
  uint64_t t = 0;          // sequence number of the newest event
  bool phase_c = false;
  int cluster = -1;
  bool drift = false;      // the active cluster changed since the previous row
  std::vector<double> y_correctness, y_stabilized, y_exact;
  v1::Diagnostics diag;    // newest event's diagnostics (from its ack)
};

struct RunTotals {
  IngestStats stats;
  AckMonitor::Snapshot acks;
  double seconds = 0;
};

class Report {
 public:
  Report(std::ostream& out, bool quiet) : out_(out), quiet_(quiet) {}

  void Row(const CheckpointRow& row);
  void Summary(const RunTotals& totals) const;

 private:
  struct ErrorStats {
    uint64_t n = 0;
    double sum = 0;
    double max = 0;
    void Add(double e);
  };

  std::ostream& out_;
  const bool quiet_;
  bool header_printed_ = false;
  // [phase A, phase C] x [correctness, stabilized]
  ErrorStats errors_[2][2];
};

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_REPORT_H_
