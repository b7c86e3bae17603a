// Server: one streamlearn server process's gRPC server, in a form tests can run in-process.
//
// Owns the model registry, the metrics, the services and the grpc::Server. Start() creates
// the models of the config file, optionally starts the metrics exposer and listens;
// Shutdown() drains: open Ingest streams acknowledge the batch in hand and end with
// UNAVAILABLE, unary calls finish, and whatever is still open at the deadline is cancelled.
// Also serves grpc.health.v1.Health and server reflection. Health service "" is SERVING until
// the drain starts (liveness); kReadyService "streamlearn.ready" is SERVING when the server can
// serve its part: the embedded mode once it listens, the cluster mode while it holds and
// serves its fair share of the shards (ClusterNode::ready(); readiness).
//
// The LMU hash secret (server/storage/lmu_secret.h) comes from Options::lmu_secret when set
// (tests), else from Options::lmu_secret_file, else from <data_dir>/lmu.secret; each file is
// created if missing. With neither a secret, a file nor a data_dir, a random secret lives as long
// as the process (logged as such).
//
//   Server::Options options;
//   options.listen = "127.0.0.1:0";
//   Server server(options);
//   absl::StatusOr<int> port = server.Start();       // the bound port
//   ...
//   server.Shutdown(absl::Seconds(10));
//
// With a data_dir, learned state is durable (server/storage/persistence.h): Start() recovers every
// stored model (newest valid snapshot + log replay) before it listens, acks follow the store
// write, and snapshots are taken in the background. Without one, state lives in memory only.
// Thread safety: Start() once, before anything else; Shutdown() and the accessors are
// thread-safe, and Shutdown() is idempotent (the destructor calls it with no grace).
#ifndef STREAMLEARN_SERVER_SERVER_H_
#define STREAMLEARN_SERVER_SERVER_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/mutex.h"
#include "core/lmu/keyed_hash.h"
#include "core/shard/model_registry.h"
#include "server/auth/gatekeeper.h"
#include "server/auth/tls.h"
#include "server/metrics.h"
#include "server/model_admission.h"
#include "server/cluster_node.h"
#include "server/forwarder.h"
#include "server/storage/persistence.h"
#include "server/storage/store.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace streamlearn::server {

// The grpc.health.v1 service name of readiness (above).
inline constexpr char kReadyService[] = "streamlearn.ready";

class AdminService;
class HealthPort;
class AuditorService;
class FuseRequestHandler;
class FuseService;
class LmuRequestHandler;
class LmuService;
class SauRequestHandler;
class SauService;

class Server {
 public:
  struct Options {
    std::string listen = "127.0.0.1:50051";  // "host:port"; port 0 picks a free port
    std::string metrics;                   // "host:port" of /metrics; empty = no exposer
    // Security (docs/SECURITY.md). Without TLS the server listens only on a loopback address
    // unless allow_plaintext says otherwise (and then warns at start).
    TlsFiles tls;
    absl::Duration tls_reload_interval = absl::Seconds(10);
    bool allow_plaintext = false;
    std::string access_file;               // the access policy; empty = an open server
    MemoryBudgets budgets;                 // CreateModel's admission (server/model_admission.h)
    // Connections (docs/SECURITY.md, "Limits"): at most max_threads threads serve calls (a
    // call beyond them is answered RESOURCE_EXHAUSTED at once); at most
    // max_streams_per_connection calls in flight on one connection (HTTP/2; more wait in the
    // client); a connection silent for keepalive is pinged and closed when the ping goes
    // unanswered for 20 s (a vanished client's calls end and free their threads).
    // Metrics cardinality (Metrics::SetCardinalityLimits).
    uint32_t metrics_max_shards = 32;
    uint32_t metrics_max_models = 512;
    int max_threads = 1024;
    int max_streams_per_connection = 256;
    absl::Duration keepalive = absl::Seconds(60);
    // A plaintext port serving only grpc.health.v1 (server/health_port.h), for probes that
    // cannot speak TLS; empty = none.
    std::string health_listen;
    std::string data_dir;                  // created if missing; empty = none
    std::string config_path;               // its models are created by Start(); empty = none
    size_t max_batch = 4096;               // events (samples) per Ingest/Update/Learn request
    size_t max_features = 4096;            // features per LMU Update / Fuse Learn sample
    uint64_t max_t_step = uint64_t{1} << 40;  // how far a new t may run ahead of the last
    size_t max_message_bytes = 16 << 20;   // larger requests get RESOURCE_EXHAUSTED
    std::string lmu_secret_file;           // empty = <data_dir>/lmu.secret
    std::optional<lmu::HashSecret> lmu_secret;  // wins over the file; for in-process tests
    // Persistence (server/storage/persistence.h; used only with a data_dir unless noted).
    storage::Durability durability = storage::Durability::kProcess;
    std::string audit_key_file;            // empty = <data_dir>/audit.key (or a process key)
    std::string encryption_keys_dir;       // <tenant>.key files: encrypted at rest; empty: none
    uint64_t audit_checkpoint_every = 1024;  // also without a data_dir
    uint64_t fuse_digest_every = 100000;   // fused samples between state digests in the chain
    uint64_t snapshot_every_steps = 100000;  // per shard part; 0 = off
    absl::Duration snapshot_interval = absl::Minutes(5);  // zero = off
    size_t keep_snapshots = 2;
    uint64_t audit_live_records = uint64_t{1} << 18;     // 0 = the chains are never archived
    uint64_t audit_segment_records = uint64_t{1} << 16;  // records per archive segment
    std::string backup_dir;                // empty = <data_dir>/backups
    // Cluster mode (docs/CLUSTER.md): NATS URLs (comma-separated); empty = embedded mode.
    // The state lives in JetStream, not in data_dir; audit_key_file and lmu_secret_file must
    // name existing files, the same on every server.
    std::string cluster;
    std::string server_id;                 // empty = the host name
    std::string advertise;                 // host:port others reach this server at; empty =
                                           // the listen host (or the host name) and the port
    int cluster_replicas = 3;              // JetStream replicas of every stream and bucket
    // The cluster mode's shared audit archive directory (empty: JetStream keeps every record).
    std::string audit_archive_dir;
    absl::Duration lease_ttl = absl::Seconds(6);
    std::string cluster_prefix = "SL";     // names of the streams and buckets
    // How long a starting server waits for an unavailable NATS cluster before it gives up.
    absl::Duration cluster_start_timeout = absl::Seconds(60);
  };

  explicit Server(Options options);
  ~Server();

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Returns the bound port. Errors: INVALID_ARGUMENT (options, config file content),
  // NOT_FOUND / PERMISSION_DENIED (config file, data_dir, lmu secret file),
  // FAILED_PRECONDITION (lmu secret file not 32 bytes), UNAVAILABLE (address in use).
  // REQUIRES: called once.
  absl::StatusOr<int> Start();

  // Drains and stops; returns when every call has ended (at the latest shortly after
  // now + grace, when gRPC cancels what is left). No-op if not started or already stopped.
  void Shutdown(absl::Duration grace) ABSL_LOCKS_EXCLUDED(shutdown_mu_);

  const Options& options() const { return options_; }
  int port() const { return port_; }
  // The --health_listen port; 0 without one. REQUIRES: Start() succeeded.
  int health_port() const;
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  // REQUIRES: Start() got as far as making the registry (it does so before anything that
  // can fail except the options, data_dir and secret checks).
  ModelRegistry& registry() { return *registry_; }
  Metrics& metrics() { return metrics_; }
  // REQUIRES: Start() succeeded.
  storage::Persistence& persistence() { return *persistence_; }
  // Null in the embedded mode.
  ClusterNode* cluster() { return cluster_.get(); }

  // Reads the access policy file again (SIGHUP). On error the policy in force stays.
  // REQUIRES: Start() succeeded.
  absl::Status ReloadAccessPolicy() { return gate_->Reload(); }

 private:
  absl::Status CreateConfiguredModels();
  absl::StatusOr<lmu::HashSecret> LmuSecret() const;
  // --server_id, or the host name.
  std::string ServerId() const;
  absl::StatusOr<std::unique_ptr<storage::Persistence>> OpenPersistence(
      std::shared_ptr<storage::NatsClient>* nats);

  const Options options_;
  std::unique_ptr<ModelRegistry> registry_;  // made by Start(), with the LMU secret
  std::unique_ptr<Gatekeeper> gate_;          // made by Start()
  Metrics metrics_;
  std::unique_ptr<storage::Persistence> persistence_;
  std::unique_ptr<ClusterNode> cluster_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<SauRequestHandler> sau_handler_;
  std::unique_ptr<LmuRequestHandler> lmu_handler_;
  std::unique_ptr<FuseRequestHandler> fuse_handler_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<AuditorService> auditor_service_;
  std::unique_ptr<Forwarder> forwarder_;  // cluster mode only
  std::unique_ptr<SauService> sau_service_;
  std::unique_ptr<LmuService> lmu_service_;
  std::unique_ptr<FuseService> fuse_service_;
  int port_ = 0;
  std::atomic<bool> ready_{false};  // what kReadyService says
  std::unique_ptr<HealthPort> health_port_;

  Mutex shutdown_mu_;  // serialises Shutdown()
  // Null before Start() and after Shutdown().
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_SERVER_H_
