// AckMonitor: what the demo learns from its ingest acks (health signals, versions,
// rejections), collected on the IngestSession's reader thread and read by the main thread.
//
//   AckMonitor monitor;
//   options.on_ack = [&](const BatchResult& r) { monitor.OnAck(r); };
//   ...
//   session->Flush();
//   AckMonitor::Snapshot s = monitor.Get();   // s.last: diagnostics of the newest event
//
// The diagnostics of an ack are those of its batch's last applied event, so the extremes
// below are over batch ends, not over every event.
// Thread safety: all methods are thread-safe.
#ifndef STREAMLEARN_CLIENT_DEMO_ACK_MONITOR_H_
#define STREAMLEARN_CLIENT_DEMO_ACK_MONITOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client/lib/ingest_session.h"
#include "core/common/mutex.h"
#include "sau.pb.h"

namespace streamlearn::demo {

class AckMonitor {
 public:
  struct Snapshot {
    bool has_last = false;
    v1::Diagnostics last;    // of the newest applied event
    uint64_t version = 0;    // ver_sau of the newest OK ack
    uint32_t shard = 0;
    uint64_t alarms = 0;     // acks whose last event raised an alarm
    double min_margin = 0;   // over acks (valid when has_last)
    int max_rj_level = 0;    // 0 green, 1 yellow, 2 red
    double max_beta_floor = 0;
    double max_lambda_star = 0;
    std::vector<std::string> rejections;
  };

  void OnAck(const BatchResult& result) ABSL_LOCKS_EXCLUDED(mu_);
  Snapshot Get() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable Mutex mu_;
  Snapshot s_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_ACK_MONITOR_H_
