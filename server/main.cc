// streamlearn-server: serves the Admin, SAU and LMU services (docs/SERVER.md).
//
// Exit codes: 0 after a graceful shutdown (SIGTERM / SIGINT) and after --help, 2 for a bad
// flag or config file, 1 when the server cannot start (address in use, data_dir not
// writable, ...).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "server/storage/lmu_secret.h"
#include "server/storage/audit_key.h"
#include "server/config.h"
#include "server/heap.h"
#include "core/common/release_process.h"
#include "server/host_port.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC listen address, host:port; an address other than loopback needs --tls_cert "
          "and --tls_key, or --allow_plaintext");
ABSL_FLAG(std::string, metrics, "127.0.0.1:9464",
          "Prometheus exposer address (host:port, path /metrics); empty disables it; give "
          "0.0.0.0:9464 for a scraper on another host");
ABSL_FLAG(std::string, tls_cert, "",
          "TLS certificate chain (PEM) of the gRPC port; watched, reloaded when it changes");
ABSL_FLAG(std::string, tls_key, "", "private key (PEM) of --tls_cert; watched with it");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA certificates (PEM): every client must present a certificate they signed (mTLS)");
ABSL_FLAG(std::string, tls_peer_ca, "",
          "cluster mode: CA certificates (PEM) that signed the other servers' certificates "
          "(default: the system's roots)");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(10),
          "how often the TLS files are checked for changes (>= 1s)");
ABSL_FLAG(bool, allow_plaintext, false,
          "serve plaintext gRPC on a non-loopback --listen address (warned about at start)");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of a plaintext port serving only grpc.health.v1 (services \"\" and "
          "streamlearn.ready), for probes that cannot speak TLS; empty: none");
ABSL_FLAG(uint64_t, max_model_bytes, uint64_t{4} << 30,
          "memory budget of one model, in bytes (an estimate from its spec, "
          "docs/SECURITY.md \"Limits\"); a larger model is refused");
ABSL_FLAG(uint64_t, max_server_bytes, 0,
          "memory budget of every model on this server, in bytes; 0: three quarters of the "
          "memory this process may use (the machine's, or its cgroup's limit)");
ABSL_FLAG(uint64_t, metrics_max_shards, 32,
          "shards of a model with series of their own; its other shards share the series "
          "shard=\"<N>+\" (docs/OPERATIONS.md, \"Metrics\")");
ABSL_FLAG(uint64_t, metrics_max_models, 512,
          "models with series of their own; the rest share model=\"_other\"");
ABSL_FLAG(uint64_t, max_threads, 1024,
          "threads serving calls (>= 4); a call beyond them is answered RESOURCE_EXHAUSTED "
          "(each open stream holds one)");
ABSL_FLAG(uint64_t, max_streams_per_connection, 256,
          "calls in flight on one client connection (HTTP/2 MAX_CONCURRENT_STREAMS)");
ABSL_FLAG(absl::Duration, keepalive, absl::Seconds(60),
          "a connection silent this long is pinged, and closed if the ping goes unanswered "
          "for 20 s (>= 1s)");
ABSL_FLAG(std::string, access_file, "",
          "access policy (JSON: principals with their tenant, roles and token hash or "
          "certificate identity; docs/SECURITY.md), re-read on SIGHUP; empty: an open server");
ABSL_FLAG(std::string, data_dir, "./data",
          "state directory (RocksDB store, keys, backups), created if missing; empty keeps "
          "learned state in memory only");
ABSL_FLAG(std::string, durability, "process",
          "when an ack is sent: 'process' (store WAL written: survives kill -9) or 'machine' "
          "(WAL fsync'ed, group commit: survives power loss)");
ABSL_FLAG(std::string, audit_key_file, "",
          "Ed25519 private key (PEM) signing audit checkpoints, created (0600) if missing; "
          "default <data_dir>/audit.key");
ABSL_FLAG(std::string, encryption_keys, "",
          "directory of <tenant>.key files (32 random bytes each): those tenants' models are "
          "encrypted at rest with AES-256-GCM (docs/SECURITY.md); empty: none");
ABSL_FLAG(uint64_t, audit_checkpoint_every, 1024,
          "audit records between signed checkpoints (>= 2)");
ABSL_FLAG(uint64_t, fuse_digest_every, 100000,
          "fused samples between full state digests in a shard's audit chain (0 = only at "
          "snapshots)");
ABSL_FLAG(uint64_t, snapshot_every_steps, 100000,
          "snapshot a shard part after this many events/samples (0 = off)");
ABSL_FLAG(absl::Duration, heap_trim_interval, absl::Seconds(10),
          "how often the C heap's free pages are handed back to the kernel (glibc: "
          "malloc_trim; jemalloc: a decay pass, which its background threads also do); "
          ">= 0, 0 = never");
ABSL_FLAG(int32_t, malloc_arenas, 2,
          "the most arenas glibc's malloc keeps (M_ARENA_MAX); fewer hold less free memory "
          "between bursts; 0 = glibc's default, 8 per core. The release server runs on "
          "jemalloc, whose arenas are set by MALLOC_CONF (narenas) instead");
ABSL_FLAG(absl::Duration, snapshot_interval, absl::Minutes(5),
          "snapshot a shard part that changed at least this often (>= 0; 0 = off)");
ABSL_FLAG(uint64_t, keep_snapshots, 2, "snapshots kept per shard part (>= 1)");
ABSL_FLAG(uint64_t, audit_live_records, uint64_t{1} << 18,
          "audit records each chain keeps in the store; older ones move to sealed segment "
          "files under <data_dir>/audit-archive (0 = never)");
ABSL_FLAG(uint64_t, audit_segment_records, uint64_t{1} << 16,
          "audit records per archive segment file (>= 1)");
ABSL_FLAG(std::string, backup_dir, "", "where Admin.Backup writes; default <data_dir>/backups");
ABSL_FLAG(std::string, config, "",
          "JSON config file (docs/SERVER.md); flags given on the command line override it");
ABSL_FLAG(uint64_t, max_batch, 4096, "maximum events per IngestRequest (1..2147483647)");
ABSL_FLAG(uint64_t, max_features, 4096,
          "maximum features per LMU or fused sample (1..2147483647)");
ABSL_FLAG(uint64_t, max_t_step, uint64_t{1} << 40,
          "how far a new event's t may run ahead of its shard's last t (1..2^62; in your t's "
          "unit: 2^40 is 18 minutes of nanoseconds)");
ABSL_FLAG(uint64_t, max_message_bytes, 16 << 20,
          "maximum request size in bytes (1..2147483647); larger requests get "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, lmu_secret_file, "",
          "32-byte secret of the LMU keyed hashes, created (mode 0600) if missing; "
          "default <data_dir>/lmu.secret");
ABSL_FLAG(std::string, cluster, "",
          "cluster mode: NATS JetStream URLs, comma-separated (nats://host:4222,...); the "
          "state lives in JetStream, shared by every server (docs/CLUSTER.md); empty: embedded");
ABSL_FLAG(std::string, server_id, "",
          "cluster mode: this server's id, [A-Za-z0-9_-]{1,64}; default the host name");
ABSL_FLAG(std::string, advertise, "",
          "cluster mode: host:port where other servers and clients reach this server; default "
          "the listen host (the host name for 0.0.0.0) and the bound port");
ABSL_FLAG(int32_t, cluster_replicas, 3,
          "cluster mode: JetStream replicas of every stream and bucket (1..5)");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(6),
          "cluster mode: a shard lease not renewed for this long is taken over (>= 1s)");
ABSL_FLAG(std::string, cluster_prefix, "SL",
          "cluster mode: prefix of the JetStream streams and buckets, [A-Z0-9_]+");
ABSL_FLAG(std::string, audit_archive_dir, "",
          "cluster mode: a directory every server of the cluster shares (a ReadWriteMany "
          "volume); each chain's old audit records move there as sealed segment files, as "
          "the embedded mode's <data_dir>/audit-archive, and leave JetStream "
          "(--audit_live_records, --audit_segment_records). Empty: JetStream keeps every "
          "record (docs/CLUSTER.md, \"Audit archive\")");
ABSL_FLAG(std::string, init_keys, "",
          "writes a new audit key (audit.key, audit.pub) and LMU secret (lmu.secret) into this "
          "directory for the servers of a cluster to share, then exits");

// jemalloc's options when the binary runs on it (server/heap.h; ignored under glibc's malloc;
// MALLOC_CONF in the environment adds to or overrides them). Background threads return freed
// pages on jemalloc's decay clock, without a stop-the-world trim; dirty pages go back after
// about a second (jemalloc's default is 10 s) and straight to the kernel (no "muzzy" stage),
// so the RSS follows what is allocated. In the soak the last minute's RSS was within 0.55% of
// the second's, where the default decay swung it by 20-25% between snapshot and archive
// bursts (bench/RESULTS.md, "Soak").
extern "C" {
// NOLINTNEXTLINE: the name is jemalloc's.
__attribute__((used)) const char* malloc_conf =
    "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
}

namespace {

using streamlearn::server::AllocatorName;
using streamlearn::server::CheckHostPort;
using streamlearn::server::CurrentAllocator;
using streamlearn::server::HeapTrimmer;
using streamlearn::server::Server;
using streamlearn::server::ServerConfig;

constexpr absl::Duration kDrainDeadline = absl::Seconds(10);
constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;
constexpr int kExitStartFailed = 1;
constexpr uint64_t kMaxInt = std::numeric_limits<int>::max();

constexpr char kUsage[] =
    "streamlearn-server: serves the Admin, SAU, LMU, Fuse and Auditor services "
    "(docs/SERVER.md)\n"
    "usage: streamlearn-server [--flag=value ...]";

// --help. absl's own --help lists the flags of a file named after the program
// (streamlearn-server.cc), so here it found none ("No flags matched.") and exited 1.
bool HelpRequested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "--helpshort" || arg == "-helpshort" ||
        arg == "-h") {
      return true;
    }
  }
  return false;
}

// The usage line and every flag defined in this file (the file that defines --listen), with
// its default and help, sorted by name.
void PrintUsage(std::ostream& out) {
  const std::string here = absl::FindCommandLineFlag("listen")->Filename();
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename() == here) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  out << kUsage << "\n\nflags (one given on the command line overrides the --config file):\n";
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string default_value = flag->DefaultValue();
    out << "  --" << flag->Name() << "  (default: "
        << (default_value.empty() ? "\"\"" : default_value) << ")\n"
        << "      " << flag->Help() << "\n";
  }
  out << "\nexit codes: 0 after a graceful shutdown (SIGTERM, SIGINT), 2 for a bad flag or "
         "config file, 1 when the server cannot start\n";
}

// The flag values absl parsed but the server cannot use. Errors: INVALID_ARGUMENT naming the
// flag and what it allows. (A value the config file gives instead is checked by
// LoadServerConfig, and Server::Start checks what reaches it once more.)
absl::Status CheckFlags() {
  auto bad = [](absl::string_view flag, absl::string_view allowed, absl::string_view got) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": must be ", allowed, ", got ", got));
  };
  auto check_address = [](absl::string_view flag, const std::string& address) {
    absl::Status s = CheckHostPort(address);
    return s.ok() ? s : absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", s.message()));
  };
  RETURN_IF_ERROR(check_address("listen", absl::GetFlag(FLAGS_listen)));
  if (const std::string metrics = absl::GetFlag(FLAGS_metrics); !metrics.empty()) {
    RETURN_IF_ERROR(check_address("metrics", metrics));
  }
  if (const std::string health = absl::GetFlag(FLAGS_health_listen); !health.empty()) {
    RETURN_IF_ERROR(check_address("health_listen", health));
  }
  if (!absl::GetFlag(FLAGS_tls_cert).empty() != !absl::GetFlag(FLAGS_tls_key).empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (const int32_t n = absl::GetFlag(FLAGS_malloc_arenas); n < 0 || n > 1024) {
    return bad("malloc_arenas", "in 0..1024 (0 = glibc's default)", absl::StrCat(n));
  }
  if (const absl::Duration d = absl::GetFlag(FLAGS_heap_trim_interval); d < absl::ZeroDuration()) {
    return bad("heap_trim_interval", ">= 0 (0 = never)", absl::FormatDuration(d));
  }
  if (const absl::Duration d = absl::GetFlag(FLAGS_snapshot_interval); d < absl::ZeroDuration()) {
    return bad("snapshot_interval", ">= 0 (0 = off)", absl::FormatDuration(d));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_keep_snapshots); n < 1) {
    return bad("keep_snapshots", ">= 1", absl::StrCat(n));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_audit_segment_records); n < 1) {
    return bad("audit_segment_records", ">= 1", absl::StrCat(n));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_audit_checkpoint_every); n < 2) {
    return bad("audit_checkpoint_every", ">= 2", absl::StrCat(n));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_max_batch); n < 1 || n > kMaxInt) {
    return bad("max_batch", absl::StrCat("in 1..", kMaxInt), absl::StrCat(n));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_max_features); n < 1 || n > kMaxInt) {
    return bad("max_features", absl::StrCat("in 1..", kMaxInt), absl::StrCat(n));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_max_t_step); n < 1 || n > (uint64_t{1} << 62)) {
    return bad("max_t_step", "in 1..2^62", absl::StrCat(n));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_max_message_bytes); n < 1 || n > kMaxInt) {
    return bad("max_message_bytes", absl::StrCat("in 1..", kMaxInt), absl::StrCat(n));
  }
  if (const absl::Duration d = absl::GetFlag(FLAGS_tls_reload_interval); d < absl::Seconds(1)) {
    return bad("tls_reload_interval", ">= 1s", absl::FormatDuration(d));
  }
  if (const absl::Duration d = absl::GetFlag(FLAGS_lease_ttl); d < absl::Seconds(1)) {
    return bad("lease_ttl", ">= 1s", absl::FormatDuration(d));
  }
  if (const int32_t n = absl::GetFlag(FLAGS_cluster_replicas); n < 1 || n > 5) {
    return bad("cluster_replicas", "in 1..5", absl::StrCat(n));
  }
  return absl::OkStatus();
}

// --init_keys DIR: the files every server of a cluster is given.
int InitKeys(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string key = (std::filesystem::path(dir) / "audit.key").string();
  const std::string secret = (std::filesystem::path(dir) / "lmu.secret").string();
  for (const std::string& f : {key, secret}) {
    if (std::filesystem::exists(f, ec)) {
      spdlog::error("--init_keys: '{}' exists; it is never overwritten", f);
      return kExitStartFailed;
    }
  }
  absl::StatusOr<streamlearn::Ed25519PrivateKey> k = streamlearn::storage::LoadOrCreateAuditKey(key);
  absl::StatusOr<streamlearn::lmu::HashSecret> s = streamlearn::storage::LoadOrCreateLmuSecret(secret);
  if (!k.ok() || !s.ok()) {
    spdlog::error("--init_keys: {}", std::string(!k.ok() ? k.status().message() : s.status().message()));
    return kExitStartFailed;
  }
  std::cout << "wrote " << key << ", " << streamlearn::storage::AuditPublicKeyPath(key)
            << " and " << secret << ": give the same files to every server (--audit_key_file, "
            << "--lmu_secret_file)\n";
  return kExitOk;
}

// absl's own flags (--helpfull, --version, --flagfile, ...): absl::ParseCommandLine handles
// them.
bool IsAbslOwnFlag(absl::string_view name) {
  for (absl::string_view own : {"help", "helpfull", "helpshort", "helppackage", "helpon",
                                "helpmatch", "version", "only_check_args", "flagfile",
                                "fromenv", "tryfromenv", "undefok"}) {
    if (name == own) return true;
  }
  return false;
}

std::string Expected(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<uint64_t>()) return "an unsigned integer";
  if (flag.IsOfType<absl::Duration>()) return "a duration such as 0, 90s, 5m or 1h30m";
  if (flag.IsOfType<bool>()) return "true or false";
  return "a valid value";
}

// The flags named on the command line (before a "--"), so that those override the config
// file; this abseil release keeps CommandLineFlag::IsSpecifiedOnCommandLine() private. Each
// is checked here the way absl::ParseCommandLine is about to parse it: absl reports an
// unknown flag or a value that does not parse and exits 1, where a bad flag is exit 2.
// Errors: INVALID_ARGUMENT naming the flag.
absl::StatusOr<absl::flat_hash_set<std::string>> FlagsOnCommandLine(int argc, char** argv) {
  absl::flat_hash_set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      continue;  // a positional argument
    }
    const size_t eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    std::optional<std::string> value;
    if (eq != absl::string_view::npos) value = std::string(arg.substr(eq + 1));
    if (name.empty() || IsAbslOwnFlag(name)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no") && !value.has_value()) {
      // --noname sets a boolean flag to false.
      if (absl::CommandLineFlag* b = absl::FindCommandLineFlag(name.substr(2));
          b != nullptr && b->IsOfType<bool>()) {
        given.insert(name.substr(2));
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (--help lists the flags)"));
    }
    if (!value.has_value()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    // Sets the value absl::ParseCommandLine sets again; its error repeats the value only.
    if (std::string error; !flag->ParseFrom(*value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": expected ", Expected(*flag), ", got '", *value, "'"));
    }
    given.insert(name);
  }
  return given;
}

// Flags given on the command line win over the config file, which wins over flag defaults.
// (The file is read here for its settings; Server::Start reads it again for its models.)
Server::Options MergeOptions(const ServerConfig& config, const std::string& config_path,
                             const absl::flat_hash_set<std::string>& given) {
  Server::Options o;
  o.config_path = config_path;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.metrics = absl::GetFlag(FLAGS_metrics);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.max_batch = absl::GetFlag(FLAGS_max_batch);
  o.max_features = absl::GetFlag(FLAGS_max_features);
  o.max_t_step = absl::GetFlag(FLAGS_max_t_step);
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.lmu_secret_file = absl::GetFlag(FLAGS_lmu_secret_file);
  o.audit_key_file = absl::GetFlag(FLAGS_audit_key_file);
  o.encryption_keys_dir = absl::GetFlag(FLAGS_encryption_keys);
  o.audit_checkpoint_every = absl::GetFlag(FLAGS_audit_checkpoint_every);
  o.fuse_digest_every = absl::GetFlag(FLAGS_fuse_digest_every);
  o.snapshot_every_steps = absl::GetFlag(FLAGS_snapshot_every_steps);
  o.snapshot_interval = absl::GetFlag(FLAGS_snapshot_interval);
  o.keep_snapshots = absl::GetFlag(FLAGS_keep_snapshots);
  o.audit_live_records = absl::GetFlag(FLAGS_audit_live_records);
  o.audit_segment_records = absl::GetFlag(FLAGS_audit_segment_records);
  o.backup_dir = absl::GetFlag(FLAGS_backup_dir);
  o.cluster = absl::GetFlag(FLAGS_cluster);
  o.server_id = absl::GetFlag(FLAGS_server_id);
  o.advertise = absl::GetFlag(FLAGS_advertise);
  o.cluster_replicas = absl::GetFlag(FLAGS_cluster_replicas);
  o.lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  o.cluster_prefix = absl::GetFlag(FLAGS_cluster_prefix);
  o.audit_archive_dir = absl::GetFlag(FLAGS_audit_archive_dir);
  o.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  o.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  o.tls.peer_ca_file = absl::GetFlag(FLAGS_tls_peer_ca);
  o.tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  o.allow_plaintext = absl::GetFlag(FLAGS_allow_plaintext);
  o.access_file = absl::GetFlag(FLAGS_access_file);
  o.health_listen = absl::GetFlag(FLAGS_health_listen);
  o.budgets.max_model_bytes = absl::GetFlag(FLAGS_max_model_bytes);
  o.max_threads = static_cast<int>(std::min<uint64_t>(absl::GetFlag(FLAGS_max_threads), kMaxInt));
  o.max_streams_per_connection = static_cast<int>(
      std::min<uint64_t>(absl::GetFlag(FLAGS_max_streams_per_connection), kMaxInt));
  o.keepalive = absl::GetFlag(FLAGS_keepalive);
  o.metrics_max_shards = static_cast<uint32_t>(
      std::min<uint64_t>(absl::GetFlag(FLAGS_metrics_max_shards), 1u << 20));
  o.metrics_max_models = static_cast<uint32_t>(
      std::min<uint64_t>(absl::GetFlag(FLAGS_metrics_max_models), 1u << 20));
  o.budgets.max_server_bytes = absl::GetFlag(FLAGS_max_server_bytes);
  if (config.health_listen && !given.contains("health_listen")) {
    o.health_listen = *config.health_listen;
  }
  if (config.tls_cert && !given.contains("tls_cert")) o.tls.cert_file = *config.tls_cert;
  if (config.tls_key && !given.contains("tls_key")) o.tls.key_file = *config.tls_key;
  if (config.tls_client_ca && !given.contains("tls_client_ca")) {
    o.tls.client_ca_file = *config.tls_client_ca;
  }
  if (config.tls_peer_ca && !given.contains("tls_peer_ca")) {
    o.tls.peer_ca_file = *config.tls_peer_ca;
  }
  if (config.allow_plaintext && !given.contains("allow_plaintext")) {
    o.allow_plaintext = *config.allow_plaintext;
  }
  if (config.access_file && !given.contains("access_file")) o.access_file = *config.access_file;
  if (config.listen && !given.contains("listen")) o.listen = *config.listen;
  if (config.metrics && !given.contains("metrics")) o.metrics = *config.metrics;
  if (config.data_dir && !given.contains("data_dir")) o.data_dir = *config.data_dir;
  if (config.max_batch && !given.contains("max_batch")) o.max_batch = *config.max_batch;
  if (config.max_features && !given.contains("max_features")) {
    o.max_features = *config.max_features;
  }
  if (config.max_t_step && !given.contains("max_t_step")) o.max_t_step = *config.max_t_step;
  if (config.lmu_secret_file && !given.contains("lmu_secret_file")) {
    o.lmu_secret_file = *config.lmu_secret_file;
  }
  if (config.max_message_bytes && !given.contains("max_message_bytes")) {
    o.max_message_bytes = *config.max_message_bytes;
  }
  if (config.audit_key_file && !given.contains("audit_key_file")) {
    o.audit_key_file = *config.audit_key_file;
  }
  if (config.encryption_keys && !given.contains("encryption_keys")) {
    o.encryption_keys_dir = *config.encryption_keys;
  }
  if (config.cluster.has_value()) {
    const streamlearn::server::ClusterConfig& c = *config.cluster;
    if (!given.contains("cluster")) o.cluster = c.nats;
    if (c.server_id && !given.contains("server_id")) o.server_id = *c.server_id;
    if (c.advertise && !given.contains("advertise")) o.advertise = *c.advertise;
    if (c.replicas && !given.contains("cluster_replicas")) o.cluster_replicas = *c.replicas;
    if (c.lease_ttl && !given.contains("lease_ttl")) o.lease_ttl = *c.lease_ttl;
    if (c.prefix && !given.contains("cluster_prefix")) o.cluster_prefix = *c.prefix;
    if (c.audit_archive_dir && !given.contains("audit_archive_dir")) {
      o.audit_archive_dir = *c.audit_archive_dir;
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  streamlearn::ReleaseProcessDefaults();
  absl::SetProgramUsageMessage(kUsage);
  if (HelpRequested(argc, argv)) {
    PrintUsage(std::cout);
    return kExitOk;
  }
  absl::StatusOr<absl::flat_hash_set<std::string>> given = FlagsOnCommandLine(argc, argv);
  if (!given.ok()) {
    spdlog::error("{}", std::string(given.status().message()));
    return kExitUsage;
  }
  absl::ParseCommandLine(argc, argv);
  if (absl::Status s = CheckFlags(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return kExitUsage;
  }
  if (const std::string dir = absl::GetFlag(FLAGS_init_keys); !dir.empty()) {
    umask(077);
    return InitKeys(dir);
  }

  // Before any thread exists (an arena is bound to a thread at its first allocation).
  if (const int32_t n = absl::GetFlag(FLAGS_malloc_arenas); n > 0) mallopt(M_ARENA_MAX, n);
  // A fixed mmap threshold: glibc otherwise raises it to the size of each large block freed
  // (up to 32 MiB), after which large transient buffers (snapshots, archive blocks) come
  // from the arenas and stay there as free memory; fixed, they are mapped and unmapped.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);

  // SIGTERM and SIGINT are blocked here, before any thread exists, so every thread inherits
  // the mask and no handler ever runs; the main thread takes them synchronously with
  // sigwait() below and does the drain in ordinary code.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // re-reads the access policy
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const std::string config_path = absl::GetFlag(FLAGS_config);
  ServerConfig config;
  if (!config_path.empty()) {
    absl::StatusOr<ServerConfig> loaded = streamlearn::server::LoadServerConfig(config_path);
    if (!loaded.ok()) {
      spdlog::error("{}", std::string(loaded.status().message()));
      return kExitUsage;
    }
    config = *std::move(loaded);
  }
  Server::Options options = MergeOptions(config, config_path, *given);
  absl::StatusOr<streamlearn::storage::Durability> durability =
      streamlearn::storage::ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok()) {
    spdlog::error("--durability: {}", std::string(durability.status().message()));
    return kExitUsage;
  }
  options.durability = *durability;

  // Everything the server creates (the data directory, the store's files, backups) is its
  // own: the event log and the audit chain are no other local user's to read.
  umask(077);

  spdlog::info(
      "streamlearn-server starting: listen {}, metrics {}, data_dir '{}', config '{}', "
      "allocator {}",
      options.listen, options.metrics.empty() ? "disabled" : options.metrics, options.data_dir,
      config_path, AllocatorName(CurrentAllocator()));

  // Process-wide, so here and not in Server (tests run many servers in one process).
  HeapTrimmer heap_trimmer(absl::GetFlag(FLAGS_heap_trim_interval));
  Server server(options);
  absl::StatusOr<int> port = server.Start();
  if (!port.ok()) {
    spdlog::error("cannot start: {}", std::string(port.status().message()));
    return port.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                      : kExitStartFailed;
  }

  for (;;) {
    int signal_number = 0;
    if (int err = sigwait(&stop_signals, &signal_number); err != 0) {
      spdlog::error("sigwait failed: {}; stopping", std::strerror(err));
      break;
    }
    if (signal_number == SIGHUP) {
      if (options.access_file.empty()) {
        spdlog::info("received SIGHUP: no --access_file to re-read (TLS files are watched)");
      } else if (absl::Status s = server.ReloadAccessPolicy(); !s.ok()) {
        spdlog::error("received SIGHUP: the access policy stays as it was: {}",
                      std::string(s.message()));
      } else {
        spdlog::info("received SIGHUP: access policy '{}' re-read", options.access_file);
      }
      continue;
    }
    spdlog::info("received {}; draining (deadline {} s)", strsignal(signal_number),
                 absl::ToInt64Seconds(kDrainDeadline));
    break;
  }
  server.Shutdown(kDrainDeadline);
  spdlog::info("drained, stopped");
  return kExitOk;
}
