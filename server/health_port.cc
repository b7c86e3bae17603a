#include "server/health_port.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace streamlearn::server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(const std::string& address,
                                                              StatusFn status) {
  std::unique_ptr<HealthPort> port(new HealthPort(std::move(status)));
  // This server serves our Health service alone: gRPC's default one (enabled process-wide by
  // the main server) would register the same methods a second time.
  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(port.get());
  port->server_ = builder.BuildAndStart();
  grpc::EnableDefaultHealthCheckService(true);
  if (port->server_ == nullptr || port->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "health_listen: cannot listen on '", address, "' (address in use or not valid here)"));
  }
  return port;
}

HealthPort::~HealthPort() { Shutdown(); }

void HealthPort::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

HealthCheckResponse::ServingStatus HealthPort::Now(const std::string& service) const {
  const std::optional<bool> s = status_(service);
  if (!s.has_value()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return *s ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthPort::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                               HealthCheckResponse* response) {
  const HealthCheckResponse::ServingStatus s = Now(request->service());
  if (s == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
  }
  response->set_status(s);
  return grpc::Status::OK;
}

grpc::Status HealthPort::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                               grpc::ServerWriter<HealthCheckResponse>* writer) {
  // The status has no change notification here; it is looked at every 200 ms and each change
  // is sent (the first answer at once), as the protocol asks.
  std::optional<HealthCheckResponse::ServingStatus> sent;
  while (!context->IsCancelled()) {
    const HealthCheckResponse::ServingStatus now = Now(request->service());
    if (!sent.has_value() || *sent != now) {
      HealthCheckResponse response;
      response.set_status(now);
      if (!writer->Write(response)) break;
      sent = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return grpc::Status::OK;
}

}  // namespace streamlearn::server
