#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "server/admin_service.h"
#include "server/auditor_service.h"
#include "server/config.h"
#include "server/storage/data_dir.h"
#include "server/storage/jetstream_storage.h"
#include "server/fuse_request_handler.h"
#include "server/fuse_service.h"
#include "server/health_port.h"
#include "server/host_port.h"
#include "server/lmu_request_handler.h"
#include "server/storage/lmu_secret.h"
#include "server/lmu_service.h"
#include "server/model_registration.h"
#include "server/storage/persistence.h"
#include "server/sau_request_handler.h"
#include "server/sau_service.h"
#include "server/storage/spec_conversion.h"
#include "spdlog/spdlog.h"

namespace streamlearn::server {
namespace {

absl::Status CheckOptions(const Server::Options& o) {
  if (o.listen.empty()) return absl::InvalidArgumentError("listen: address is empty");
  if (absl::Status s = CheckHostPort(o.listen); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen: ", s.message()));
  }
  if (!o.metrics.empty()) {
    if (absl::Status s = CheckHostPort(o.metrics); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: ", s.message()));
    }
  }
  if (!o.health_listen.empty()) {
    if (absl::Status s = CheckHostPort(o.health_listen); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("health_listen: ", s.message()));
    }
  }
  RETURN_IF_ERROR(CheckTlsFiles(o.tls));
  const std::string listen_host = o.listen.substr(0, o.listen.rfind(':'));
  if (!o.tls.enabled() && !o.allow_plaintext && !IsLoopbackHost(listen_host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen: '", o.listen, "' is not a loopback address and there is no TLS: give "
        "--tls_cert and --tls_key, listen on 127.0.0.1, or say --allow_plaintext "
        "(docs/SECURITY.md)"));
  }
  if (o.tls_reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_reload_interval must be >= 1s, got ",
                     absl::FormatDuration(o.tls_reload_interval)));
  }
  if (o.snapshot_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot_interval must be >= 0 (0 = off), got ",
                     absl::FormatDuration(o.snapshot_interval)));
  }
  if (o.max_batch < 1) return absl::InvalidArgumentError("max_batch must be >= 1");
  if (o.max_threads < 4) {
    return absl::InvalidArgumentError(absl::StrCat("max_threads must be >= 4, got ", o.max_threads));
  }
  if (o.max_streams_per_connection < 1) {
    return absl::InvalidArgumentError("max_streams_per_connection must be >= 1");
  }
  if (o.keepalive < absl::Seconds(1)) {
    return absl::InvalidArgumentError("keepalive must be >= 1s");
  }
  if (o.max_message_bytes < 1 ||
      o.max_message_bytes > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("max_message_bytes must be in 1..",
                                                   std::numeric_limits<int>::max(), ", got ",
                                                   o.max_message_bytes));
  }
  return absl::OkStatus();
}

// This machine's name as a server id: [A-Za-z0-9_-] (other bytes become '-').
const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// Cluster mode: calls fn until it is not UNAVAILABLE or `timeout` passed. A NATS cluster
// electing a leader answers nothing for a few seconds; a server that starts then waits for it
// (saying why) instead of exiting into a restart loop.
template <typename Fn>
auto RetryWhileUnavailable(absl::Duration timeout, Fn fn) -> decltype(fn()) {
  const absl::Time give_up = absl::Now() + timeout;
  for (;;) {
    auto r = fn();
    const absl::Status& s = StatusOf(r);
    if (s.ok() || !absl::IsUnavailable(s) || absl::Now() >= give_up) return r;
    spdlog::warn("cluster not ready, retrying: {}", s.ToString());
    absl::SleepFor(absl::Seconds(1));
  }
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "streamlearn";
  std::string name(buf);
  for (char& c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-')) {
      c = '-';
    }
  }
  return name.substr(0, 64);
}

// Cluster mode: the server id and replicas are valid, and the key and the secret every server
// shares exist (no server may make its own: its signatures and hashes would differ from the
// others').
absl::Status CheckClusterKeys(const Server::Options& o) {
  if (o.cluster_replicas < 1 || o.cluster_replicas > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster_replicas must be 1..5, got ", o.cluster_replicas));
  }
  const bool id_ok =
      o.server_id.size() <= 64 && std::all_of(o.server_id.begin(), o.server_id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
      });
  if (!id_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server_id '", o.server_id, "' is not 1..64 of [A-Za-z0-9_-] (empty: the host name)"));
  }
  if (o.audit_key_file.empty()) {
    return absl::InvalidArgumentError(
        "cluster mode needs --audit_key_file: the same Ed25519 key on every server (make one "
        "with 'streamlearn-server --init_keys DIR')");
  }
  if (!o.lmu_secret.has_value() && o.lmu_secret_file.empty()) {
    return absl::InvalidArgumentError(
        "cluster mode needs --lmu_secret_file: the same LMU hash secret on every server (make "
        "one with 'streamlearn-server --init_keys DIR')");
  }
  for (const std::string& f : {o.audit_key_file, o.lmu_secret_file}) {
    std::error_code ec;
    if (!f.empty() && !std::filesystem::exists(f, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cluster mode: '", f, "' does not exist; every server must be given the same file "
          "(make them once with 'streamlearn-server --init_keys DIR')"));
    }
  }
  return absl::OkStatus();
}

absl::Status CreateDataDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("data_dir '", dir, "': cannot create: ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

Server::Server(Options options) : options_(std::move(options)) {}

Server::~Server() {
  Shutdown(absl::ZeroDuration());
  metrics_.WatchStoreMemory(nullptr);  // also when Start failed after setting it
}

absl::StatusOr<int> Server::Start() {
  RETURN_IF_ERROR(CheckOptions(options_));
  if (!options_.cluster.empty()) RETURN_IF_ERROR(CheckClusterKeys(options_));
  if (!options_.data_dir.empty() && options_.cluster.empty()) {
    RETURN_IF_ERROR(CreateDataDir(options_.data_dir));
    // Before any key is created: a directory that held state must still have all of it.
    const std::filesystem::path dir(options_.data_dir);
    storage::DataDirFiles files{.dir = options_.data_dir,
                       .audit_key = options_.audit_key_file.empty()
                                        ? (dir / "audit.key").string()
                                        : options_.audit_key_file,
                       .lmu_secret = ""};
    if (!options_.lmu_secret.has_value()) {
      files.lmu_secret = options_.lmu_secret_file.empty() ? (dir / "lmu.secret").string()
                                                          : options_.lmu_secret_file;
    }
    RETURN_IF_ERROR(storage::CheckDataDir(files));
  }
  absl::StatusOr<lmu::HashSecret> secret = LmuSecret();
  if (!secret.ok()) return secret.status();
  registry_ = std::make_unique<ModelRegistry>(*secret);
  metrics_.SetCardinalityLimits(options_.metrics_max_shards, options_.metrics_max_models);
  {
    absl::StatusOr<std::unique_ptr<Gatekeeper>> gate = Gatekeeper::Create(
        options_.access_file,
        options_.cluster.empty() ? std::string() : Gatekeeper::PeerToken(*secret));
    OPENSSL_cleanse(secret->data(), secret->size());
    if (!gate.ok()) return gate.status();
    gate_ = *std::move(gate);
  }
  std::shared_ptr<storage::NatsClient> nats;
  absl::StatusOr<std::unique_ptr<storage::Persistence>> persistence = OpenPersistence(&nats);
  if (!persistence.ok()) return persistence.status();
  persistence_ = *std::move(persistence);
  RETURN_IF_ERROR(RetryWhileUnavailable(
      options_.cluster.empty() ? absl::ZeroDuration() : options_.cluster_start_timeout,
      [&] { return persistence_->Recover(registry_.get()); }));
  RETURN_IF_ERROR(CreateConfiguredModels());
  if (persistence_->store() != nullptr) {
    storage::Store* store = persistence_->store();  // cleared in Stop, before the store closes
    metrics_.WatchStoreMemory([store] { return store->Memory(); });
  }
  if (!options_.metrics.empty()) {
    RETURN_IF_ERROR(metrics_.StartExposer(options_.metrics));
  }

  BatchLimits limits(options_.max_batch, options_.max_features);
  limits.max_t_step = options_.max_t_step;
  sau_handler_ = std::make_unique<SauRequestHandler>(registry_.get(), &metrics_, limits,
                                                     persistence_.get());
  lmu_handler_ = std::make_unique<LmuRequestHandler>(registry_.get(), &metrics_, limits,
                                                     persistence_.get());
  fuse_handler_ = std::make_unique<FuseRequestHandler>(registry_.get(), &metrics_, limits,
                                                       persistence_.get());
  std::string backup_root = options_.backup_dir;
  if (backup_root.empty() && !options_.data_dir.empty()) {
    backup_root = (std::filesystem::path(options_.data_dir) / "backups").string();
  }
  admin_service_ = std::make_unique<AdminService>(registry_.get(), &metrics_, persistence_.get(),
                                                  backup_root, gate_.get());
  admin_service_->set_cluster_mode(!options_.cluster.empty());
  admin_service_->set_budgets(options_.budgets);
  auditor_service_ = std::make_unique<AuditorService>(registry_.get(), persistence_.get(),
                                                      &metrics_, &draining_, gate_.get());
  if (!options_.cluster.empty()) {
    forwarder_ = std::make_unique<Forwarder>(
        ServerId(), &metrics_, absl::Seconds(10),
        options_.tls.enabled() ? PeerCredentialsFor(options_.tls, options_.tls_reload_interval)
                               : nullptr,
        gate_->open() ? std::string() : gate_->peer_token());
    admin_service_->set_forwarder(forwarder_.get());
    auditor_service_->set_forwarder(forwarder_.get());
  }
  sau_service_ = std::make_unique<SauService>(sau_handler_.get(), &metrics_, &draining_,
                                              gate_.get(), forwarder_.get());
  lmu_service_ = std::make_unique<LmuService>(lmu_handler_.get(), &metrics_, &draining_,
                                              gate_.get(), forwarder_.get());
  fuse_service_ = std::make_unique<FuseService>(fuse_handler_.get(), &metrics_, &draining_,
                                                gate_.get(), forwarder_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      options_.listen,
      options_.tls.enabled() ? ServerCredentialsFor(options_.tls, options_.tls_reload_interval)
                             : grpc::InsecureServerCredentials(),
      &port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  grpc::ResourceQuota quota("streamlearn");
  quota.SetMaxThreads(options_.max_threads);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options_.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  // Clients may ping (their keepalive) as often as every 10 s without data.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // gRPC sets SO_REUSEPORT by default, which would let a second server on the same port
  // start and split the traffic; one process owns its shards, so a busy port is an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(admin_service_.get());
  builder.RegisterService(sau_service_.get());
  builder.RegisterService(lmu_service_.get());
  builder.RegisterService(fuse_service_.get());
  builder.RegisterService(auditor_service_.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", options_.listen,
                                               "' (address in use or not valid for this host)"));
  }
  // Readiness (grpc.health.v1 service kReadyService): the embedded mode is ready once it
  // listens (recovery ran before); the cluster mode once a balance round ends with this
  // server holding and serving its share (ClusterNode::ready()).
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  {
    MutexLock lock(&shutdown_mu_);
    server_ = std::move(server);
  }
  persistence_->StartSnapshotter(registry_.get());
  ready_.store(nats == nullptr, std::memory_order_release);
  if (health != nullptr) health->SetServingStatus(kReadyService, nats == nullptr);
  if (!options_.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HealthPort>> port =
        HealthPort::Start(options_.health_listen, [this](const std::string& service) {
          const bool up = !draining_.load(std::memory_order_acquire);
          if (service.empty()) return std::optional<bool>(up);
          if (service == kReadyService) {
            return std::optional<bool>(up && ready_.load(std::memory_order_acquire));
          }
          return std::optional<bool>();
        });
    if (!port.ok()) {
      Shutdown(absl::ZeroDuration());
      return port.status();
    }
    health_port_ = *std::move(port);
  }
  if (nats != nullptr) {
    std::string address = options_.advertise;
    if (address.empty()) {
      std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
      if (host.empty() || host == "0.0.0.0" || host == "[::]") host = HostName();
      address = absl::StrCat(host, ":", port_);
    }
    absl::StatusOr<std::unique_ptr<ClusterNode>> node =
        RetryWhileUnavailable(options_.cluster_start_timeout, [&] {
          return ClusterNode::Start({.id = ServerId(),
                                     .address = address,
                                     .prefix = options_.cluster_prefix,
                                     .replicas = options_.cluster_replicas,
                                     .lease_ttl = options_.lease_ttl,
                                     .on_ready =
                                         [this, health](bool ready) {
                                           ready_.store(ready, std::memory_order_release);
                                           if (health != nullptr) {
                                             health->SetServingStatus(kReadyService, ready);
                                           }
                                         }},
                                    nats, registry_.get(), persistence_.get(), &metrics_);
        });
    if (!node.ok()) {
      Shutdown(absl::ZeroDuration());
      return node.status();
    }
    cluster_ = *std::move(node);
    admin_service_->set_cluster(cluster_.get());
    spdlog::info("cluster: server '{}' at {} joined (NATS {}); serving {} shard(s)",
                 cluster_->options().id, address, options_.cluster, cluster_->held());
  }
  const std::string listen_host = options_.listen.substr(0, options_.listen.rfind(':'));
  if (!options_.tls.enabled() && !IsLoopbackHost(listen_host)) {
    spdlog::warn(
        "PLAINTEXT on a non-loopback address ({}), as --allow_plaintext says: anyone on the "
        "network can read and forge every call{}. Use --tls_cert/--tls_key (docs/SECURITY.md).",
        options_.listen, gate_->open() ? " and the server is open (no --access_file)" : "");
  } else if (gate_->open() && !IsLoopbackHost(listen_host)) {
    spdlog::warn(
        "no --access_file: every client that reaches {} may create, read, write and audit "
        "every model (docs/SECURITY.md)",
        options_.listen);
  }
  spdlog::info("security: {}{}; {}", options_.tls.enabled() ? "TLS" : "plaintext",
               options_.tls.client_ca_file.empty() ? "" : " with client certificates (mTLS)",
               gate_->open() ? std::string("open (no access policy)")
                             : absl::StrCat("access policy '", options_.access_file, "'"));
  spdlog::info("serving gRPC on {} (port {}); metrics {}; max_batch {}; max_message_bytes {}",
               options_.listen, port_,
               options_.metrics.empty() ? std::string("disabled")
                                        : absl::StrCat("on http://", options_.metrics, "/metrics"),
               options_.max_batch, options_.max_message_bytes);
  return port_;
}

std::string Server::ServerId() const {
  return options_.server_id.empty() ? HostName() : options_.server_id;
}

absl::Status Server::CreateConfiguredModels() {
  if (options_.config_path.empty()) return absl::OkStatus();
  absl::StatusOr<ServerConfig> config = LoadServerConfig(options_.config_path);
  if (!config.ok()) return config.status();
  const std::string origin = absl::StrCat("config file '", options_.config_path, "'");
  for (size_t i = 0; i < config->models.size(); ++i) {
    ModelSpec& spec = config->models[i];
    const std::string name = spec.name;
    if (!options_.cluster.empty() && !registry_->Find(name).ok()) {
      // Another server of the cluster may have created it since this one recovered.
      RETURN_IF_ERROR(persistence_->RegisterStoredModels(registry_.get()).status());
    }
    // A stored model of that name (recovered, or created by another server of the cluster):
    // the config must still describe it.
    // Either reading of the entry will do (ServerConfig::models_as_stored): a model stored
    // before a default changed keeps the default it was created with.
    const auto same_as_stored = [&](const std::shared_ptr<Model>& have) -> absl::Status {
      absl::StatusOr<std::shared_ptr<Model>> fresh = Model::Create(spec, registry_->secret());
      if (!fresh.ok()) {
        return absl::Status(fresh.status().code(), absl::StrCat(origin, ": model \"", name,
                                                                "\": ", fresh.status().message()));
      }
      const std::string stored = storage::ModelSpecToProto(have->spec()).SerializeAsString();
      const auto same = [&](const ModelSpec& s) {
        return storage::ModelSpecToProto(s).SerializeAsString() == stored;
      };
      bool matches = same((*fresh)->spec());
      if (!matches && i < config->models_as_stored.size()) {
        absl::StatusOr<std::shared_ptr<Model>> old_reading =
            Model::Create(config->models_as_stored[i], registry_->secret());
        matches = old_reading.ok() && same((*old_reading)->spec());
      }
      if (!matches) {
        return absl::FailedPreconditionError(absl::StrCat(
            origin, ": model \"", name, "\" differs from the stored model of that name in ",
            options_.cluster.empty() ? absl::StrCat("'", options_.data_dir, "'")
                                     : std::string("the cluster"),
            "; a stored model keeps its spec (use another name)"));
      }
      return absl::OkStatus();
    };
    if (absl::StatusOr<std::shared_ptr<Model>> have = registry_->Find(name); have.ok()) {
      RETURN_IF_ERROR(same_as_stored(*have));
      continue;
    }
    absl::StatusOr<std::shared_ptr<Model>> model = RegisterModel(
        ModelSpec(spec), registry_.get(), origin, [this](const std::shared_ptr<Model>& m) {
          return persistence_->OnCreate(m, registry_->secret());
        });
    if (!options_.cluster.empty() && absl::IsAlreadyExists(model.status())) {
      // Servers started together: another one created it first (the models bucket keeps the
      // first entry). Take the stored one, if the config describes it.
      RETURN_IF_ERROR(persistence_->RegisterStoredModels(registry_.get()).status());
      absl::StatusOr<std::shared_ptr<Model>> have = registry_->Find(name);
      if (have.ok()) {
        RETURN_IF_ERROR(same_as_stored(*have));
        continue;
      }
    }
    if (!model.ok()) {
      return absl::Status(model.status().code(), absl::StrCat(origin, ": model \"", name,
                                                              "\": ", model.status().message()));
    }
  }
  return persistence_->RecordFloor();
}

absl::StatusOr<std::unique_ptr<storage::Persistence>> Server::OpenPersistence(
    std::shared_ptr<storage::NatsClient>* nats) {
  storage::PersistenceOptions po{.data_dir = options_.data_dir,
                                 .durability = options_.durability,
                                 .audit_key_file = options_.audit_key_file,
                                 .encryption_keys_dir = options_.encryption_keys_dir,
                                 .checkpoint_every = options_.audit_checkpoint_every,
                                 .fuse_digest_every = options_.fuse_digest_every,
                                 .snapshot_every_steps = options_.snapshot_every_steps,
                                 .snapshot_interval = options_.snapshot_interval,
                                 .keep_snapshots = options_.keep_snapshots,
                                 .audit_live_records = options_.audit_live_records,
                                 .audit_segment_records = options_.audit_segment_records,
                                 .audit_archive_dir = options_.audit_archive_dir};
  if (options_.cluster.empty()) {
    if (!options_.audit_archive_dir.empty()) {
      return absl::InvalidArgumentError(
          "--audit_archive_dir applies to the cluster mode; the embedded mode archives under "
          "<data_dir>/audit-archive (mount another volume there to keep it elsewhere)");
    }
    return storage::Persistence::Open(po, &metrics_);
  }
  // Cluster mode: the state lives in JetStream; every server signs and hashes with the same
  // key and secret, which must exist (docs/CLUSTER.md, "Keys").
  po.data_dir.clear();
  po.cluster = true;
  ASSIGN_OR_RETURN(std::unique_ptr<storage::NatsClient> client,
                   storage::NatsClient::Connect(
                       {.servers = options_.cluster,
                        .name = absl::StrCat("streamlearn ", options_.server_id)}));
  *nats = std::shared_ptr<storage::NatsClient>(std::move(client));
  absl::StatusOr<std::unique_ptr<storage::JetStreamStorage>> backend =
      RetryWhileUnavailable(options_.cluster_start_timeout, [&] {
        return storage::JetStreamStorage::Open(*nats, {.prefix = options_.cluster_prefix,
                                                       .replicas = options_.cluster_replicas});
      });
  if (!backend.ok()) return backend.status();
  return storage::Persistence::OpenWith(po, *std::move(backend), &metrics_);
}

absl::StatusOr<lmu::HashSecret> Server::LmuSecret() const {
  if (options_.lmu_secret.has_value()) return *options_.lmu_secret;
  std::string path = options_.lmu_secret_file;
  if (path.empty() && !options_.data_dir.empty()) {
    path = (std::filesystem::path(options_.data_dir) / "lmu.secret").string();
  }
  if (path.empty()) {
    spdlog::warn("no data_dir and no lmu secret file: the LMU hash secret lives only as long "
                 "as this process");
    return storage::RandomLmuSecret();
  }
  return storage::LoadOrCreateLmuSecret(path);
}

int Server::health_port() const {
  return health_port_ == nullptr ? 0 : health_port_->port();
}

void Server::Shutdown(absl::Duration grace) {
  MutexLock lock(&shutdown_mu_);
  if (server_ == nullptr) return;
  draining_.store(true, std::memory_order_release);
  // Cluster mode: hand every shard over first, so other servers take them at once.
  if (cluster_ != nullptr) cluster_->Drain();
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  if (grace == absl::InfiniteDuration()) {
    server_->Shutdown();
  } else {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(
                          absl::ToChronoNanoseconds(std::max(grace, absl::ZeroDuration()))));
  }
  server_->Wait();
  server_.reset();
  if (health_port_ != nullptr) health_port_->Shutdown();
  // Every call has ended: no writer is left, so the snapshotter can stop and the store close
  // (with the server object).
  metrics_.WatchStoreMemory(nullptr);
  if (persistence_ != nullptr) persistence_->Stop();
}

}  // namespace streamlearn::server
