// ProgressBar: a one-line progress display on stderr for long ingests.
//
// Shows percent done (by bytes read, when the input size is known), events (or samples)
// sent and their rate. It draws only when enabled (the CLI enables it when stderr is a terminal) and
// at most ten times a second, so calling Update per event is cheap.
//
//   ProgressBar bar(isatty(STDERR_FILENO), reader.size_bytes());
//   bar.Update(reader.bytes_read(), events);   // per event
//   bar.Finish();                               // erases the line
//
// Thread safety: none; one thread.
#ifndef STREAMLEARN_CLIENT_CLI_PROGRESS_H_
#define STREAMLEARN_CLIENT_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace streamlearn::cli {

class ProgressBar {
 public:
  // `unit` names what is counted ("events", "samples").
  ProgressBar(bool enabled, std::optional<uint64_t> total_bytes, std::string unit = "events");

  void Update(uint64_t bytes, uint64_t items) {
    if (!enabled_) return;
    if (++calls_ % 256 != 0) return;  // the clock is read every 256 calls only
    Draw(bytes, items, /*force=*/false);
  }
  void Finish();

 private:
  void Draw(uint64_t bytes, uint64_t items, bool force);

  const bool enabled_;
  const std::optional<uint64_t> total_bytes_;
  const std::string unit_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  uint64_t calls_ = 0;
  bool drawn_ = false;
};

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_PROGRESS_H_
