// server/auth/access_policy.h and the name rule for tenants (core/common/name_rule.h): the
// policy file's parse errors, lookups, the role table, and scoped names.
#include "server/auth/access_policy.h"

#include <gtest/gtest.h>

#include <string>

#include "core/common/name_rule.h"
#include "server/auth/gatekeeper.h"

namespace streamlearn::server {
namespace {

std::string Principal(const std::string& body) {
  return "{\"principals\": [" + body + "]}";
}

const std::string kHash = TokenHash("secret-token");

TEST(AccessPolicyTest, FindsPrincipalsByTokenAndByCertificateIdentity) {
  absl::StatusOr<AccessPolicy> p = AccessPolicy::Parse(Principal(
      "{\"id\": \"w\", \"tenant\": \"acme\", \"roles\": [\"writer\", \"reader\"], "
      "\"token_sha256\": \"" + kHash + "\"},"
      "{\"id\": \"ops\", \"roles\": [\"operator\"], \"cert_identity\": \"ops.example\"}"));
  ASSERT_TRUE(p.ok()) << p.status();
  const server::Principal* w = p->ByToken("secret-token");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->id, "w");
  EXPECT_EQ(w->tenant, "acme");
  EXPECT_EQ(w->roles, kRoleWriter | kRoleReader);
  EXPECT_EQ(p->ByToken("secret-token "), nullptr);
  EXPECT_EQ(p->ByToken(""), nullptr);
  const server::Principal* ops = p->ByCertIdentity("ops.example");
  ASSERT_NE(ops, nullptr);
  EXPECT_TRUE(ops->tenant.empty());
  EXPECT_EQ(p->ByCertIdentity("w"), nullptr);
}

TEST(AccessPolicyTest, RefusesMalformedPoliciesNamingThePrincipalAndTheProblem) {
  struct Case {
    std::string json;
    std::string says;
  };
  const std::string tok = "\"token_sha256\": \"" + kHash + "\"";
  const Case cases[] = {
      {"[]", "must be a JSON object"},
      {"{\"principals\": {}}", "array of principals"},
      {"{\"principals\": [], \"extra\": 1}", "unknown key"},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [\"root\"], " + tok + "}"),
       "unknown role"},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [], " + tok + "}"), "roles"},
      {Principal("{\"id\": \"a\", \"roles\": [\"reader\"], " + tok + "}"), "needs a \"tenant\""},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [\"operator\"], " + tok + "}"),
       "an operator has no tenant"},
      {Principal("{\"id\": \"a\", \"tenant\": \"Bad.Tenant\", \"roles\": [\"reader\"], " + tok +
                 "}"),
       "not a tenant name"},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [\"reader\"]}"),
       "needs \"token_sha256\" or \"cert_identity\""},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [\"reader\"], "
                 "\"token_sha256\": \"abc\"}"),
       "64 hex digits"},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [\"reader\"], " + tok +
                 "}, {\"id\": \"b\", \"tenant\": \"t\", \"roles\": [\"reader\"], " + tok + "}"),
       "another principal's too"},
      {Principal("{\"id\": \"a b\", \"tenant\": \"t\", \"roles\": [\"reader\"], " + tok + "}"),
       "principal name"},
      {Principal("{\"id\": \"a\", \"tenant\": \"t\", \"roles\": [\"reader\"], " + tok +
                 ", \"password\": \"x\"}"),
       "unknown key"},
      {"{\"principals\": [", "line 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    absl::StatusOr<AccessPolicy> p = AccessPolicy::Parse(c.json);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.says), std::string::npos) << p.status();
  }
}

TEST(AccessPolicyTest, TheRoleTableGivesEachRoleItsRpcs) {
  const server::Principal reader{"r", "acme", kRoleReader};
  EXPECT_TRUE(Authorize(reader, Rpc::kQuery).ok());
  EXPECT_TRUE(Authorize(reader, Rpc::kListModels).ok());
  const absl::Status no = Authorize(reader, Rpc::kIngest);
  EXPECT_EQ(no.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(no.message().find("SAU.Ingest"), std::string::npos) << no;
  EXPECT_NE(no.message().find("writer"), std::string::npos) << no;
  const server::Principal admin{"a", "acme", kRoleAdmin};
  const server::Principal op{"o", "", kRoleOperator};
  for (int i = 0; i < kNumRpcs; ++i) {
    const Rpc rpc = static_cast<Rpc>(i);
    SCOPED_TRACE(RpcName(rpc));
    // An admin may do everything in its tenant except the operator's snapshots and backups.
    EXPECT_EQ(Authorize(admin, rpc).ok(), rpc != Rpc::kSnapshot && rpc != Rpc::kBackup);
    // An operator reads metadata and takes snapshots and backups, and reads no data.
    EXPECT_EQ(Authorize(op, rpc).ok(),
              rpc == Rpc::kSnapshot || rpc == Rpc::kBackup || rpc == Rpc::kGetModel ||
                  rpc == Rpc::kListModels || rpc == Rpc::kShardMap);
  }
}

TEST(ScopedNamesTest, TenantsScopeTheirModelsAndNoOneElses) {
  const Caller acme = Caller::Tenant("acme", "p");
  std::string name = "clicks";
  ASSERT_TRUE(acme.Scope(&name).ok());
  EXPECT_EQ(name, "acme/clicks");
  name = "acme/clicks";
  ASSERT_TRUE(acme.Scope(&name).ok());
  EXPECT_EQ(name, "acme/clicks");
  name = "beta/clicks";
  EXPECT_EQ(acme.Scope(&name).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(name, "beta/clicks");
  name = "..";
  EXPECT_EQ(acme.Scope(&name).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(acme.Sees("acme/clicks"));
  EXPECT_FALSE(acme.Sees("beta/clicks"));
  EXPECT_FALSE(acme.Sees("clicks"));
  EXPECT_EQ(acme.Local("acme/clicks"), "clicks");

  const Caller dflt = Caller::Tenant(kDefaultTenant, "p");
  name = "clicks";
  ASSERT_TRUE(dflt.Scope(&name).ok());
  EXPECT_EQ(name, "clicks");
  EXPECT_TRUE(dflt.Sees("clicks"));
  EXPECT_FALSE(dflt.Sees("acme/clicks"));

  const Caller op = Caller::Operator("o");
  name = "acme/clicks";
  ASSERT_TRUE(op.Scope(&name).ok());
  EXPECT_EQ(name, "acme/clicks");
  EXPECT_EQ(op.Local("acme/clicks"), "acme/clicks");
}

TEST(ScopedNamesTest, TheStoredNameRuleAcceptsOneScopeOfAValidTenant) {
  for (const char* ok : {"clicks", "acme/clicks", "a-b_c/x.y", "0/x"}) {
    EXPECT_TRUE(CheckScopedModelName(ok).ok()) << ok;
  }
  for (const char* bad : {"", "/x", "acme/", "a/b/c", "default/x", "Acme/x", "-a/x", "acme/..",
                          "acme/a b", "x/y/"}) {
    EXPECT_EQ(CheckScopedModelName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(CheckTenantName(std::string(kTenantMaxBytes, 'a')).ok());
  EXPECT_FALSE(CheckTenantName(std::string(kTenantMaxBytes + 1, 'a')).ok());
  EXPECT_EQ(ScopedModelName("acme", "x"), "acme/x");
  EXPECT_EQ(ScopedModelName(kDefaultTenant, "x"), "x");
  EXPECT_EQ(TenantOfScoped("x"), kDefaultTenant);
  EXPECT_EQ(NameInScope("acme/x"), "x");
}

TEST(PeerTokenTest, IsDerivedFromTheSharedSecretAndDiffersWithIt) {
  lmu::HashSecret a{};
  lmu::HashSecret b{};
  b[0] = 1;
  EXPECT_EQ(Gatekeeper::PeerToken(a).size(), 64u);
  EXPECT_EQ(Gatekeeper::PeerToken(a), Gatekeeper::PeerToken(a));
  EXPECT_NE(Gatekeeper::PeerToken(a), Gatekeeper::PeerToken(b));
}

}  // namespace
}  // namespace streamlearn::server
