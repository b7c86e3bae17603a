#include "server/storage/nats_client.h"

#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/common/absl_view.h"
#include "core/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

constexpr int64_t kConsumersOffSeconds = 30;

struct MsgDeleter {
  void operator()(natsMsg* m) const { natsMsg_Destroy(m); }
};
struct PubAckDeleter {
  void operator()(jsPubAck* a) const { jsPubAck_Destroy(a); }
};
struct SubDeleter {
  void operator()(natsSubscription* s) const {
    natsSubscription_Unsubscribe(s);
    natsSubscription_Destroy(s);
  }
};
struct MetaDeleter {
  void operator()(jsMsgMetaData* m) const { jsMsgMetaData_Destroy(m); }
};
struct StreamInfoDeleter {
  void operator()(jsStreamInfo* s) const { jsStreamInfo_Destroy(s); }
};
struct OptionsDeleter {
  void operator()(natsOptions* o) const { natsOptions_Destroy(o); }
};
using MsgPtr = std::unique_ptr<natsMsg, MsgDeleter>;

// The status for a failed call: `what` names the operation and its subject.
absl::Status NatsError(natsStatus s, jsErrCode jerr, std::string_view what) {
  const char* text = nats_GetLastError(nullptr);
  std::string detail = absl::StrCat(AbslView(what), ": ", natsStatus_GetText(s));
  if (text != nullptr && *text != '\0') absl::StrAppend(&detail, " (", text, ")");
  if (jerr == JSStreamWrongLastSequenceErr) {
    return absl::AbortedError(absl::StrCat(AbslView(what),
                                           ": the subject moved on (another writer)"));
  }
  if (jerr == JSNoMessageFoundErr || s == NATS_NOT_FOUND) return absl::NotFoundError(detail);
  // The cluster in an election or short of a quorum: it passes (the caller retries).
  if (jerr == JSClusterNotAvailErr || jerr == JSStreamOfflineErr ||
      jerr == JSClusterNotLeaderErr || jerr == JSClusterNoPeersErr) {
    return absl::UnavailableError(detail);
  }
  switch (s) {
    case NATS_TIMEOUT:
    case NATS_NO_RESPONDERS:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_NO_SERVER:
    case NATS_STALE_CONNECTION:
    case NATS_IO_ERROR:
    case NATS_NOT_YET_CONNECTED:
      return absl::UnavailableError(detail);
    default:
      break;
  }
  if (jerr != 0) absl::StrAppend(&detail, " [JetStream error ", static_cast<int>(jerr), "]");
  return absl::InternalError(detail);
}

jsOptions RequestOptions(const NatsOptions& o) {
  jsOptions js;
  jsOptions_Init(&js);
  js.Wait = absl::ToInt64Milliseconds(o.timeout);
  return js;
}

StoredMsg ToStored(natsMsg* m, uint64_t seq) {
  StoredMsg out;
  out.seq = seq;
  out.subject = natsMsg_GetSubject(m);
  out.data.assign(natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m)));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NatsClient>> NatsClient::Connect(const NatsOptions& options) {
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("cluster: no NATS server URL given");
  }
  std::unique_ptr<NatsClient> client(new NatsClient(options));
  natsOptions* raw = nullptr;
  if (natsStatus s = natsOptions_Create(&raw); s != NATS_OK) {
    return NatsError(s, jsErrCode(0), "NATS options");
  }
  std::unique_ptr<natsOptions, OptionsDeleter> opts(raw);
  std::vector<std::string> urls = absl::StrSplit(options.servers, ',', absl::SkipWhitespace());
  std::vector<const char*> ptrs;
  for (const std::string& u : urls) ptrs.push_back(u.c_str());
  natsStatus s = natsOptions_SetServers(opts.get(), ptrs.data(), static_cast<int>(ptrs.size()));
  if (s == NATS_OK) s = natsOptions_SetName(opts.get(), options.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts.get(), absl::ToInt64Milliseconds(options.timeout));
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts.get(), -1);  // forever
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts.get(), 250);
  if (s == NATS_OK) s = natsOptions_SetPingInterval(opts.get(), 2000);
  if (s != NATS_OK) return NatsError(s, jsErrCode(0), "NATS options");
  if (s = natsConnection_Connect(&client->conn_, opts.get()); s != NATS_OK) {
    return NatsError(s, jsErrCode(0), absl::StrCat("connecting to NATS at ", options.servers));
  }
  jsOptions js = RequestOptions(options);
  if (s = natsConnection_JetStream(&client->js_, client->conn_, &js); s != NATS_OK) {
    return NatsError(s, jsErrCode(0), "JetStream context");
  }
  return client;
}

NatsClient::~NatsClient() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (conn_ != nullptr) {
    natsConnection_Close(conn_);
    natsConnection_Destroy(conn_);
  }
}

int64_t NatsClient::max_payload() const { return natsConnection_GetMaxPayload(conn_); }

absl::Status NatsClient::EnsureStream(const StreamSpec& spec) {
  jsOptions o = RequestOptions(options_);
  jsErrCode jerr = jsErrCode(0);
  jsStreamInfo* raw = nullptr;
  // Look first: a stream that exists needs only its own leader to answer, not the cluster's
  // meta leader (which may be in an election while a NATS node is down).
  natsStatus s = js_GetStreamInfo(&raw, js_, spec.name.c_str(), &o, &jerr);
  std::unique_ptr<jsStreamInfo, StreamInfoDeleter> info(raw);
  if (s != NATS_OK && jerr != JSStreamNotFoundErr && s != NATS_NOT_FOUND) {
    return NatsError(s, jerr, absl::StrCat("stream ", spec.name));
  }
  if (s != NATS_OK) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = spec.name.c_str();
    std::vector<const char*> subjects;
    for (const std::string& subject : spec.subjects) subjects.push_back(subject.c_str());
    cfg.Subjects = subjects.data();
    cfg.SubjectsLen = static_cast<int>(subjects.size());
    cfg.Storage = js_FileStorage;
    cfg.Replicas = spec.replicas;
    cfg.MaxMsgsPerSubject = spec.max_msgs_per_subject;
    cfg.MaxMsgSize = spec.max_msg_size;
    cfg.AllowRollup = true;
    cfg.DenyDelete = true;
    raw = nullptr;
    jerr = jsErrCode(0);
    s = js_AddStream(&raw, js_, &cfg, &o, &jerr);
    info.reset(raw);
    if (s == NATS_OK) return absl::OkStatus();
    if (jerr != JSStreamNameExistErr) {
      return NatsError(s, jerr, absl::StrCat("creating stream ", spec.name));
    }
    raw = nullptr;  // another server made it first: check it as below
    s = js_GetStreamInfo(&raw, js_, spec.name.c_str(), &o, &jerr);
    info.reset(raw);
    if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("stream ", spec.name));
  }
  const jsStreamConfig* have = info->Config;
  if (have->Replicas != spec.replicas) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", spec.name, " exists with ", have->Replicas,
                     " replicas; this server asks for ", spec.replicas));
  }
  std::vector<std::string> have_subjects(have->Subjects, have->Subjects + have->SubjectsLen);
  if (have_subjects != spec.subjects) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", spec.name, " exists with other subjects"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> NatsClient::Publish(std::string_view subject, std::string_view data,
                                             Expect expect) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = absl::ToInt64Milliseconds(options_.timeout);
  if (expect.kind == Expect::Kind::kEmpty) po.ExpectNoMessage = true;
  if (expect.kind == Expect::Kind::kLastSeq) po.ExpectLastSubjectSeq = expect.seq;
  std::string subj(subject);
  jsPubAck* raw = nullptr;
  jsErrCode jerr = jsErrCode(0);
  natsStatus s = js_Publish(&raw, js_, subj.c_str(), data.data(), static_cast<int>(data.size()),
                            &po, &jerr);
  std::unique_ptr<jsPubAck, PubAckDeleter> ack(raw);
  if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("publish to ", subj));
  return ack->Sequence;
}

absl::StatusOr<std::optional<StoredMsg>> NatsClient::LastMsg(std::string_view stream,
                                                             std::string_view subject) {
  std::string st(stream), subj(subject);
  jsOptions o = RequestOptions(options_);
  jsErrCode jerr = jsErrCode(0);
  natsMsg* raw = nullptr;
  natsStatus s = js_GetLastMsg(&raw, js_, st.c_str(), subj.c_str(), &o, &jerr);
  MsgPtr m(raw);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return std::optional<StoredMsg>();
  if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("last message of ", subj));
  return std::optional<StoredMsg>(ToStored(m.get(), natsMsg_GetSequence(m.get())));
}

absl::StatusOr<StoredMsg> NatsClient::GetMsg(std::string_view stream, uint64_t seq) {
  std::string st(stream);
  jsOptions o = RequestOptions(options_);
  jsErrCode jerr = jsErrCode(0);
  natsMsg* raw = nullptr;
  natsStatus s = js_GetMsg(&raw, js_, st.c_str(), seq, &o, &jerr);
  MsgPtr m(raw);
  if (s != NATS_OK) {
    return NatsError(s, jerr, absl::StrCat("message ", seq, " of stream ", st));
  }
  return ToStored(m.get(), seq);
}

absl::StatusOr<std::optional<StoredMsg>> NatsClient::NextMsg(std::string_view stream,
                                                             std::string_view subject,
                                                             uint64_t from) {
  const std::string api = absl::StrCat("$JS.API.STREAM.MSG.GET.", AbslView(stream));
  const std::string request =
      nlohmann::json{{"seq", from}, {"next_by_subj", std::string(subject)}}.dump();
  natsMsg* raw = nullptr;
  natsStatus s = natsConnection_Request(&raw, conn_, api.c_str(), request.data(),
                                        static_cast<int>(request.size()),
                                        absl::ToInt64Milliseconds(options_.timeout));
  MsgPtr reply(raw);
  const std::string what = absl::StrCat("reading ", AbslView(subject), " from ", from);
  if (s != NATS_OK) return NatsError(s, jsErrCode(0), what);
  nlohmann::json j = nlohmann::json::parse(
      std::string_view(natsMsg_GetData(reply.get()),
                       static_cast<size_t>(natsMsg_GetDataLength(reply.get()))),
      nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError(absl::StrCat(what, ": JetStream's answer is not JSON"));
  }
  if (j.contains("error")) {
    const nlohmann::json& e = j["error"];
    const int code = e.value("err_code", 0);
    if (code == JSNoMessageFoundErr || e.value("code", 0) == 404) {
      return std::optional<StoredMsg>();
    }
    const std::string text = absl::StrCat(what, ": ", e.value("description", "error"));
    if (e.value("code", 0) == 503) return absl::UnavailableError(text);
    return absl::InternalError(text);
  }
  const nlohmann::json& m = j["message"];
  if (!m.is_object() || !m.contains("seq") || !m.contains("subject")) {
    return absl::InternalError(absl::StrCat(what, ": JetStream's answer holds no message"));
  }
  StoredMsg out;
  out.seq = m["seq"].get<uint64_t>();
  out.subject = m["subject"].get<std::string>();
  const std::string data64 = m.value("data", "");
  std::string data;
  if (!absl::Base64Unescape(data64, &data)) {
    return absl::InternalError(absl::StrCat(what, ": the message's data is not base64"));
  }
  out.data = std::move(data);
  return std::optional<StoredMsg>(std::move(out));
}

absl::Status NatsClient::ScanSubject(std::string_view stream, std::string_view subject,
                                     uint64_t from, uint64_t through,
                                     const std::function<bool(const StoredMsg&)>& fn) {
  if (from == 0) from = 1;
  if (from > through) return absl::OkStatus();
  // Fast: an ordered consumer pushes the messages. Its creation needs the cluster's meta
  // leader, which a NATS node's loss can keep in an election for seconds: then (or when the
  // consumer stalls) the rest is read one message at a time from the stream's leader.
  // Nothing to read: say so at once (a consumer would wait for its timeout).
  ASSIGN_OR_RETURN(std::optional<StoredMsg> first, NextMsg(stream, subject, from));
  if (!first.has_value() || first->seq > through) return absl::OkStatus();
  uint64_t next = from;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  if (now_ms >= consumers_off_until_ms_.load(std::memory_order_relaxed)) {
    bool done = false;
    absl::Status fast = ScanWithConsumer(stream, subject, from, through, fn, &next, &done);
    if (done || (!fast.ok() && !absl::IsUnavailable(fast))) return fast;
    if (!fast.ok()) {
      spdlog::warn("storage: {}; reading one message at a time for {} s", fast.ToString(),
                   kConsumersOffSeconds);
      consumers_off_until_ms_.store(now_ms + kConsumersOffSeconds * 1000,
                                    std::memory_order_relaxed);
    }
  }
  while (next <= through) {
    ASSIGN_OR_RETURN(std::optional<StoredMsg> m, NextMsg(stream, subject, next));
    if (!m.has_value() || m->seq > through) return absl::OkStatus();
    if (!fn(*m)) return absl::OkStatus();
    next = m->seq + 1;
  }
  return absl::OkStatus();
}

absl::Status NatsClient::ScanSubjectDirect(std::string_view stream, std::string_view subject,
                                           const std::function<bool(const StoredMsg&)>& fn) {
  uint64_t next = 1;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<StoredMsg> m, NextMsg(stream, subject, next));
    if (!m.has_value() || !fn(*m)) return absl::OkStatus();
    next = m->seq + 1;
  }
}

absl::Status NatsClient::ScanWithConsumer(std::string_view stream, std::string_view subject,
                                          uint64_t from, uint64_t through,
                                          const std::function<bool(const StoredMsg&)>& fn,
                                          uint64_t* next, bool* done) {
  std::string st(stream), subj(subject);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = st.c_str();
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = from;
  jsOptions o = RequestOptions(options_);
  jsErrCode jerr = jsErrCode(0);
  natsSubscription* raw = nullptr;
  natsStatus s = js_SubscribeSync(&raw, js_, subj.c_str(), &o, &so, &jerr);
  if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("reading ", subj));
  std::unique_ptr<natsSubscription, SubDeleter> sub(raw);
  // The first message exists (ScanSubject saw it): a consumer that has not pushed it within
  // a second is stuck, and the caller falls back.
  const int64_t wait_ms = absl::ToInt64Milliseconds(options_.timeout);
  int64_t wait = std::min<int64_t>(wait_ms, 1000);
  while (true) {
    natsMsg* mraw = nullptr;
    s = natsSubscription_NextMsg(&mraw, sub.get(), wait);
    wait = wait_ms;
    MsgPtr m(mraw);
    if (s != NATS_OK) {
      return NatsError(s, jsErrCode(0),
                       absl::StrCat("reading ", subj, " (waiting for sequence ", through, ")"));
    }
    jsMsgMetaData* meta_raw = nullptr;
    if (s = natsMsg_GetMetaData(&meta_raw, m.get()); s != NATS_OK) {
      return NatsError(s, jsErrCode(0), absl::StrCat("metadata of a message of ", subj));
    }
    std::unique_ptr<jsMsgMetaData, MetaDeleter> meta(meta_raw);
    const uint64_t seq = meta->Sequence.Stream;
    if (seq > through || !fn(ToStored(m.get(), seq)) || seq == through ||
        meta->NumPending == 0) {
      *done = true;
      return absl::OkStatus();
    }
    *next = seq + 1;
  }
}

absl::Status NatsClient::PurgeSubject(std::string_view stream, std::string_view subject,
                                      uint64_t before) {
  // Nothing lies before sequence 1; nats-server reads a purge sequence of 1 as no bound and
  // would purge the whole subject.
  if (before == 1) return absl::OkStatus();
  std::string st(stream), subj(subject);
  jsOptions o = RequestOptions(options_);
  o.Stream.Purge.Subject = subj.c_str();
  o.Stream.Purge.Sequence = before;
  jsErrCode jerr = jsErrCode(0);
  natsStatus s = js_PurgeStream(js_, st.c_str(), &o, &jerr);
  if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("purging ", subj));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> NatsClient::LastSeq(std::string_view stream) {
  std::string st(stream);
  jsOptions o = RequestOptions(options_);
  jsErrCode jerr = jsErrCode(0);
  jsStreamInfo* raw = nullptr;
  natsStatus s = js_GetStreamInfo(&raw, js_, st.c_str(), &o, &jerr);
  std::unique_ptr<jsStreamInfo, StreamInfoDeleter> info(raw);
  if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("stream ", st));
  return info->State.LastSeq;
}

absl::StatusOr<std::vector<std::string>> NatsClient::Subjects(std::string_view stream,
                                                             std::string_view filter) {
  std::string st(stream), f(filter);
  jsOptions o = RequestOptions(options_);
  o.Stream.Info.SubjectsFilter = f.c_str();
  jsErrCode jerr = jsErrCode(0);
  jsStreamInfo* raw = nullptr;
  natsStatus s = js_GetStreamInfo(&raw, js_, st.c_str(), &o, &jerr);
  std::unique_ptr<jsStreamInfo, StreamInfoDeleter> info(raw);
  if (s != NATS_OK) return NatsError(s, jerr, absl::StrCat("subjects of stream ", st));
  std::vector<std::string> out;
  if (info->State.Subjects != nullptr) {
    for (int i = 0; i < info->State.Subjects->Count; ++i) {
      out.emplace_back(info->State.Subjects->List[i].Subject);
    }
  }
  return out;
}

}  // namespace streamlearn::storage
