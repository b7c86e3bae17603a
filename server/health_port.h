// HealthPort: grpc.health.v1.Health alone, on a plaintext port of its own (--health_listen).
//
// Kubernetes' gRPC probes speak plaintext only; with TLS on the service port they cannot reach
// the health service there. This port answers Check (and Watch) for the services the main
// port's health service knows, "" (liveness) and "streamlearn.ready" (readiness), and
// nothing else: it tells anyone who reaches it whether the server is up and ready, no more.
//
//   auto port = HealthPort::Start("0.0.0.0:8081", [&](const std::string& service) {
//     return service.empty() ? std::optional<bool>(!draining) : std::nullopt; });
//   ...
//   port->Shutdown();
//
// Thread safety: `status` is called from gRPC's threads; Shutdown() once.
#ifndef STREAMLEARN_SERVER_HEALTH_PORT_H_
#define STREAMLEARN_SERVER_HEALTH_PORT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "health.grpc.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace streamlearn::server {

class HealthPort final : public grpc::health::v1::Health::Service {
 public:
  // service -> SERVING (true) / NOT_SERVING (false), or nullopt for a service it does not know.
  using StatusFn = std::function<std::optional<bool>(const std::string& service)>;

  // Errors: UNAVAILABLE naming the address when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<HealthPort>> Start(const std::string& address,
                                                           StatusFn status);
  ~HealthPort() override;

  int port() const { return port_; }
  // Stops at once (a Watch in progress ends).
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  explicit HealthPort(StatusFn status) : status_(std::move(status)) {}
  grpc::health::v1::HealthCheckResponse::ServingStatus Now(const std::string& service) const;

  const StatusFn status_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_HEALTH_PORT_H_
