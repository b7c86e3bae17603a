#include "client/demo/ack_monitor.h"

#include <algorithm>

namespace streamlearn::demo {

void AckMonitor::OnAck(const BatchResult& r) {
  MutexLock lock(&mu_);
  if (!r.status.ok()) {
    s_.rejections.push_back("batch " + std::to_string(r.batch) + ": " + r.status.ToString());
    return;
  }
  s_.version = r.ack.ver_sau();
  s_.shard = r.ack.shard();
  if (r.ack.applied() == 0) return;
  const v1::Diagnostics& d = r.ack.last();
  s_.min_margin = s_.has_last ? std::min(s_.min_margin, d.margin()) : d.margin();
  s_.max_rj_level = std::max(s_.max_rj_level, static_cast<int>(d.rj_level()));
  s_.max_beta_floor = std::max(s_.max_beta_floor, d.beta_floor());
  s_.max_lambda_star = std::max(s_.max_lambda_star, d.lambda_star());
  if (d.alarm()) ++s_.alarms;
  s_.last = d;
  s_.has_last = true;
}

AckMonitor::Snapshot AckMonitor::Get() const {
  MutexLock lock(&mu_);
  return s_;
}

}  // namespace streamlearn::demo
