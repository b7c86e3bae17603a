// RpcFrames: the input of the rpc_* fuzz targets, a short sequence of requests, each a
// protobuf message with the RPC it goes to and the caller who sends it:
//
//   frame := u8 op | u8 caller | u16 length (little-endian) | `length` bytes of the message
//
// A frame whose length runs past the end takes what is left, so a mutation inside the last
// message keeps the framing. Several frames in one input reach what depends on earlier
// batches (duplicate t, warm-up, rebuilds) while each input still starts from fresh models.
//
//   for (const fuzz::RpcFrame& f : fuzz::SplitFrames(input)) ...
//
// Thread safety: plain functions.
#ifndef STREAMLEARN_FUZZ_RPC_FRAMES_H_
#define STREAMLEARN_FUZZ_RPC_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/auth/gatekeeper.h"

namespace streamlearn::fuzz {

inline constexpr size_t kMaxFrames = 8;

struct RpcFrame {
  uint8_t op = 0;
  uint8_t caller = 0;
  std::string_view message;
};

inline std::vector<RpcFrame> SplitFrames(std::string_view in) {
  std::vector<RpcFrame> frames;
  while (in.size() >= 4 && frames.size() < kMaxFrames) {
    RpcFrame f;
    f.op = static_cast<uint8_t>(in[0]);
    f.caller = static_cast<uint8_t>(in[1]);
    const size_t n = static_cast<uint8_t>(in[2]) | size_t{static_cast<uint8_t>(in[3])} << 8;
    in.remove_prefix(4);
    f.message = in.substr(0, n);
    in.remove_prefix(f.message.size());
    frames.push_back(f);
  }
  return frames;
}

// The inverse, for the seeds (fuzz/make_seeds.cc). REQUIRES: message.size() < 65536.
inline void AppendFrame(uint8_t op, uint8_t caller, std::string_view message, std::string* out) {
  out->push_back(static_cast<char>(op));
  out->push_back(static_cast<char>(caller));
  out->push_back(static_cast<char>(message.size() & 0xff));
  out->push_back(static_cast<char>(message.size() >> 8));
  out->append(message);
}

// The caller a frame names: 0 an open server's, 1 the default tenant's, 2 tenant "acme"'s,
// 3 an operator, 4 a peer (mod 5).
inline server::Caller CallerOf(uint8_t byte) {
  switch (byte % 5) {
    case 1:
      return server::Caller::Tenant("default", "fuzz-default");
    case 2:
      return server::Caller::Tenant("acme", "fuzz-acme");
    case 3:
      return server::Caller::Operator("fuzz-operator");
    case 4:
      return server::Caller::Peer();
    default:
      return server::Caller::Open();
  }
}

}  // namespace streamlearn::fuzz

#endif  // STREAMLEARN_FUZZ_RPC_FRAMES_H_
