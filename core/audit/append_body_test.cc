#include "core/audit/append_body.h"

#include <string>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

struct AppendCase {
  const char* name;
  std::string json;
  const char* body;        // the expected canonical body, when accepted
  const char* error_part;  // nullptr: accepted
};

constexpr char kCertificate[] =
    R"({"c":[1.0],"d":1.5,"epsilon":0.5,"eta_c":0.0,"eta_d":0.0,"kappa":1.0,)"
    R"("rows":[{"a":[1.0],"alpha":1.0,"b":0.5}]})";

TEST(AppendBodyTest, Table) {
  const AppendCase cases[] = {
      {"object_becomes_canonical_payload", R"({ "b" : 1 , "a" : [true, "x"] })",
       R"({"kind":"append","payload":{"a":[true,"x"],"b":1}})", nullptr},
      {"valid_certificate", std::string(R"({"certificate":)") + kCertificate + "}",
       nullptr, nullptr},
      {"not_an_object", "[1]", nullptr, "json: audit JSON: expected '{' at top level"},
      {"null", R"({"a":null})", nullptr, "json: audit JSON: null is not an audit value"},
      {"too_deep", R"({"a":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]})", nullptr,
       "nesting deeper than 16 levels"},
      {"too_long", "{\"a\":\"" + std::string(kAppendMaxBytes, 'x') + "\"}", nullptr,
       "exceeds max_bytes 65536"},
      {"certificate_not_an_object", R"({"certificate":[1]})", nullptr,
       "json: \"certificate\" must be an object"},
      {"certificate_refused", R"({"certificate":{"c":[1.0],"d":1.0}})", nullptr,
       "certificate refused: certificate: field \"kappa\" missing or not a number"},
  };
  for (const AppendCase& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::string> body = EncodeAppendBody(c.json);
    if (c.error_part == nullptr) {
      ASSERT_TRUE(body.ok()) << body.status();
      if (c.body != nullptr) {
        EXPECT_EQ(*body, c.body);
      }
    } else {
      ASSERT_FALSE(body.ok());
      EXPECT_EQ(body.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(body.status().message().find(c.error_part), absl::string_view::npos)
          << body.status();
    }
  }
}

}  // namespace
}  // namespace streamlearn
