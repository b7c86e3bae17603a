"""The streamlearn Python package's credentials against real servers (docs/SECURITY.md): TLS
with the right and a wrong CA, bearer tokens of tenants and roles, an mTLS client certificate
named by the access policy, and the refusal of a token over plaintext off loopback.

Three server children share one access policy (random tokens, made with `secrets`) and
certificates made by scripts/make-certs.sh in a temporary directory:
  tls    --tls_cert/--tls_key (TLS, tokens);
  mtls   the same with --tls_client_ca (every client presents a certificate);
  plain  no TLS on 127.0.0.1 (a token over loopback plaintext is allowed).

Run by ctest (python_client.security) with the python of the venv python_client.install made:
    VENV/bin/python tests/python/test_security.py --server_binary PATH [unittest args]
STREAMLEARN_TEST_SEED sets the random inputs' seed (printed); the tokens are random.
"""

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import unittest
from typing import Dict, List

import harness

import grpc
import streamlearn
from streamlearn import errors

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
MAKE_CERTS = os.path.join(SOURCE, "scripts", "make-certs.sh")

D, DV = 4, 2
SAU = {"d": D, "d_v": DV, "r": 16}

# id -> (tenant or None, roles, whether it has a token; else its cert_identity)
PRINCIPALS = {
    "acme-admin": ("acme", ["admin"], True),
    "acme-writer": ("acme", ["writer"], True),
    "acme-reader": ("acme", ["reader"], True),
    "acme-auditor": ("acme", ["auditor"], True),
    "beta-admin": ("beta", ["admin"], True),
    "ops": (None, ["operator"], True),
    "acme-r": ("acme", ["reader"], False),       # cert_identity "acme-r" (its certificate's CN)
}


def make_certs(directory: str, *args: str) -> None:
    result = subprocess.run(["bash", MAKE_CERTS, directory] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"make-certs.sh failed:\n{result.stdout}")


def start_server(directory: str, name: str, flags: List[str]) -> "tuple":
    server = harness.ServerProcess(
        harness.ARGS.server_binary,
        ["--data_dir=" + os.path.join(directory, name + "-data")] + flags,
        os.path.join(directory, name + ".log"))
    port = server.wait_for_port()
    if port <= 0:
        raise AssertionError(f"the {name} server did not start:\n" + server.log())
    return server, f"127.0.0.1:{port}"


class SecurityTest(unittest.TestCase):
    dir: str
    certs: str
    tokens: Dict[str, str]
    servers: List[harness.ServerProcess]
    tls_address: str
    mtls_address: str
    plain_address: str

    @classmethod
    def setUpClass(cls) -> None:
        os.environ.pop("STREAMLEARN_TOKEN", None)
        cls.dir = harness.temp_dir("streamlearn-py-security-")
        cls.certs = os.path.join(cls.dir, "certs")
        make_certs(cls.certs, "--server", "localhost", "--client", "acme-r",
                   "--client", "nobody")
        cls.other_certs = os.path.join(cls.dir, "other-certs")   # another CA
        make_certs(cls.other_certs, "--client", "acme-r")
        cls.tokens = {pid: secrets.token_urlsafe(24)
                      for pid, (_, _, has_token) in PRINCIPALS.items() if has_token}
        principals = []
        for pid, (tenant, roles, has_token) in PRINCIPALS.items():
            p = {"id": pid, "roles": roles}
            if tenant:
                p["tenant"] = tenant
            if has_token:
                p["token_sha256"] = hashlib.sha256(cls.tokens[pid].encode()).hexdigest()
            else:
                p["cert_identity"] = pid
            principals.append(p)
        access = os.path.join(cls.dir, "access.json")
        with open(access, "w", encoding="utf-8") as f:
            json.dump({"principals": principals}, f)
        tls = ["--tls_cert=" + cls.cert("localhost.crt"),
               "--tls_key=" + cls.cert("localhost.key"), "--access_file=" + access]
        cls.servers = []
        try:
            for name, flags in (("tls", tls),
                                ("mtls", tls + ["--tls_client_ca=" + cls.cert("ca.crt")]),
                                ("plain", ["--access_file=" + access])):
                server, address = start_server(cls.dir, name, flags)
                cls.servers.append(server)
                setattr(cls, name + "_address", address)
        except BaseException:
            cls.tearDownClass()
            raise
        cls.rng = harness.rng()

    @classmethod
    def tearDownClass(cls) -> None:
        for server in cls.servers:
            server.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def cert(cls, name: str) -> str:
        return os.path.join(cls.certs, name)

    def client(self, principal: str = "", address: str = "", **kwargs) -> streamlearn.Client:
        """A client of the TLS server (by default) with `principal`'s token; closed at the
        test's end."""
        kwargs.setdefault("token", self.tokens[principal] if principal else "")
        if "tls" not in kwargs and "tls_cert" not in kwargs:
            kwargs.setdefault("tls_ca", self.cert("ca.crt"))
        kwargs.setdefault("timeout", 30.0)
        c = streamlearn.Client(address or self.tls_address, **kwargs)
        self.addCleanup(c.close)
        return c

    def events(self, first_t: int, n: int) -> list:
        return [(t, [self.rng.gauss(0.0, 1.0) for _ in range(D)],
                 [self.rng.gauss(0.0, 1.0) for _ in range(DV)])
                for t in range(first_t, first_t + n)]

    # --- TLS --------------------------------------------------------------------------------

    def test_tls_with_the_right_ca_works_and_with_a_wrong_one_does_not(self) -> None:
        ok = self.client("acme-admin")
        self.assertTrue(ok.tls)
        ok.list_models()
        # The certificate names 127.0.0.1 and localhost; another name may be checked instead.
        self.client("acme-admin", tls_ca=self.cert("ca.crt"),
                    tls_server_name="localhost").list_models()

        for kwargs in ({"tls_ca": os.path.join(self.other_certs, "ca.crt")},  # wrong CA
                       {"tls_ca": self.cert("ca.crt"), "tls_server_name": "wrong.example"},
                       {"tls": False}):                                     # plaintext to TLS
            with self.subTest(**kwargs):
                with self.assertRaises(errors.Unavailable) as e:
                    self.client("acme-admin", connect_timeout=2.0, **kwargs)
                self.assertIn("cannot connect to " + self.tls_address, e.exception.message)
                if kwargs.get("tls_ca"):
                    self.assertIn("TLS", e.exception.message)
                # Connecting lazily, the first call fails the same way once retry_timeout
                # has passed.
                lazy = self.client("acme-admin", connect_timeout=None, retry_timeout=1.0,
                                   **kwargs)
                with self.assertRaises(errors.Unavailable):
                    lazy.list_models()

    def test_bad_credential_arguments_fail_before_connecting(self) -> None:
        with self.assertRaises(ValueError):
            streamlearn.Client(self.tls_address, tls_cert=self.cert("acme-r.crt"))
        with self.assertRaises(FileNotFoundError) as e:
            streamlearn.Client(self.tls_address, tls_ca=os.path.join(self.dir, "no-such.crt"))
        self.assertIn("no-such.crt", str(e.exception))

    # --- tokens, tenants and roles ----------------------------------------------------------

    def test_tenants_have_their_own_models_of_the_same_name(self) -> None:
        acme, beta = self.client("acme-admin"), self.client("beta-admin")
        info = acme.create_model("shared", shards=2, sau=SAU)
        self.assertEqual(info.spec.name, "shared")                 # the plain name back
        acme.ingest("shared", self.events(1, 40), routing_key="k")
        self.assertEqual(acme.query("shared", [0.1] * D, routing_key="k").events, 40)

        # beta does not see acme's model: NOT_FOUND, not PERMISSION_DENIED (nothing leaks).
        for call in (lambda: beta.describe("shared"),
                     lambda: beta.query("shared", [0.1] * D, routing_key="k"),
                     lambda: beta.shard_map("shared"),
                     lambda: beta.ingest("shared", self.events(1, 1), routing_key="k")):
            with self.assertRaises(errors.NotFound):
                call()
        # Naming another tenant's scope is refused.
        with self.assertRaises(errors.PermissionDenied):
            beta.describe("acme/shared")

        self.assertEqual(beta.create_model("shared", shards=2, sau=SAU).spec.name, "shared")
        q = [self.rng.gauss(0.0, 1.0) for _ in range(D)]
        before = beta.query("shared", q, routing_key="k")
        self.assertEqual(before.events, 0)
        # acme's writes do not reach beta's model of the same name, and the reverse.
        acme.ingest("shared", self.events(41, 30), routing_key="k")
        after = beta.query("shared", q, routing_key="k")
        self.assertEqual((after.events, after.ver_sau, list(after.y_hat)),
                         (before.events, before.ver_sau, list(before.y_hat)))
        beta.ingest("shared", self.events(1, 5), routing_key="k")
        self.assertEqual(beta.query("shared", q, routing_key="k").events, 5)
        self.assertEqual(acme.query("shared", q, routing_key="k").events, 70)

        beta.create_model("beta_only", sau=SAU)
        acme_names = {m.spec.name for m in acme.list_models()}
        self.assertIn("shared", acme_names)
        self.assertNotIn("beta_only", acme_names)
        self.assertFalse([n for n in acme_names if "/" in n], acme_names)   # plain names
        self.assertEqual({m.spec.name for m in beta.list_models()}, {"shared", "beta_only"})
        # An operator sees every tenant's models by their scoped names.
        ops_names = {m.spec.name for m in self.client("ops").list_models()}
        self.assertTrue({"acme/shared", "beta/shared", "beta/beta_only"} <= ops_names,
                        ops_names)

    def test_roles_allow_their_calls_only(self) -> None:
        self.client("acme-admin").create_model("roles", sau=SAU)
        writer, reader = self.client("acme-writer"), self.client("acme-reader")
        auditor = self.client("acme-auditor")
        # A writer streams (a bidi stream carries the token) but cannot read.
        stats = writer.ingest("roles", self.events(1, 20), routing_key="k", batch_size=5)
        self.assertEqual(stats.applied, 20)
        with self.assertRaises(errors.PermissionDenied) as e:
            writer.query("roles", [0.0] * D, routing_key="k")
        self.assertEqual(e.exception.details["method"], "SAU.Query")
        # A reader reads but cannot write or create.
        self.assertEqual(reader.query("roles", [0.0] * D, routing_key="k").events, 20)
        with self.assertRaises(errors.PermissionDenied):
            reader.ingest("roles", self.events(21, 5), routing_key="k")
        with self.assertRaises(errors.PermissionDenied):
            reader.create_model("roles2", sau=SAU)
        # An auditor reads the chain (a server stream carries the token) and nothing else.
        head = auditor.audit_head("roles", 0)
        records = list(auditor.audit_read("roles", 0))
        self.assertEqual(len(records), head.next_index)
        with self.assertRaises(errors.PermissionDenied):
            auditor.query("roles", [0.0] * D, routing_key="k")
        with self.assertRaises(errors.PermissionDenied):
            reader.audit_head("roles", 0)
        # Everyone reads the metadata of its tenant's models.
        for c in (writer, reader, auditor):
            self.assertEqual(c.describe("roles").spec.name, "roles")

    def test_an_unknown_or_missing_token_is_unauthenticated(self) -> None:
        stranger = self.client(token=secrets.token_urlsafe(24))
        anonymous = self.client()
        for c in (stranger, anonymous):
            for call in (c.list_models, lambda: c.describe("shared"),
                         lambda: c.create_model("nope", sau=SAU)):
                with self.assertRaises(errors.Unauthenticated) as e:
                    call()
                self.assertEqual(e.exception.code, grpc.StatusCode.UNAUTHENTICATED)

    def test_the_token_is_taken_from_the_environment(self) -> None:
        os.environ["STREAMLEARN_TOKEN"] = self.tokens["acme-reader"]
        try:
            c = streamlearn.Client(self.tls_address, tls_ca=self.cert("ca.crt"))
            self.addCleanup(c.close)
            c.list_models()
            with self.assertRaises(errors.PermissionDenied):        # a reader's token
                c.create_model("from_env", sau=SAU)
            explicit = self.client("acme-admin")                     # an argument wins
            explicit.create_model("from_env", sau=SAU)
            with self.assertRaises(errors.Unauthenticated):          # "" sends none
                self.client(token="").list_models()
        finally:
            del os.environ["STREAMLEARN_TOKEN"]

    # --- mTLS -------------------------------------------------------------------------------

    def test_a_client_certificate_named_by_the_policy_is_admitted_without_a_token(self) -> None:
        def cert(name, directory=self.certs):
            return {"tls_ca": self.cert("ca.crt"),
                    "tls_cert": os.path.join(directory, name + ".crt"),
                    "tls_key": os.path.join(directory, name + ".key")}

        # The admin's token with any certificate of the CA; the token names the principal.
        admin = self.client("acme-admin", self.mtls_address, **cert("nobody"))
        admin.create_model("mtls", sau=SAU)
        admin.ingest("mtls", self.events(1, 10), routing_key="k")

        reader = self.client("", self.mtls_address, **cert("acme-r"))   # no token
        self.assertEqual(reader.query("mtls", [0.0] * D, routing_key="k").events, 10)
        self.assertEqual([m.spec.name for m in reader.list_models()], ["mtls"])
        with self.assertRaises(errors.PermissionDenied):          # acme-r is a reader
            reader.ingest("mtls", self.events(11, 1), routing_key="k")

        # A certificate of the CA the policy does not name, without a token: unauthenticated.
        with self.assertRaises(errors.Unauthenticated):
            self.client("", self.mtls_address, **cert("nobody")).list_models()
        # No certificate, or one of another CA (its CN in the policy or not): no connection.
        for kwargs in ({"tls_ca": self.cert("ca.crt")}, cert("acme-r", self.other_certs)):
            with self.subTest(tls_cert=kwargs.get("tls_cert")):
                c = self.client("acme-admin", self.mtls_address, connect_timeout=None,
                                retry_timeout=1.0, **kwargs)
                with self.assertRaises(errors.Unavailable):
                    c.list_models()

    # --- plaintext --------------------------------------------------------------------------

    def test_a_token_goes_over_plaintext_to_loopback_only(self) -> None:
        # Loopback: allowed, and the token is on unary and streaming calls without TLS.
        admin = self.client("acme-admin", self.plain_address, tls=False)
        self.assertFalse(admin.tls)
        admin.create_model("plain", sau=SAU)
        self.assertEqual(admin.ingest("plain", self.events(1, 3)).applied, 3)
        self.assertEqual(admin.query("plain", [0.0] * D).events, 3)
        with self.assertRaises(errors.Unauthenticated):
            self.client("", self.plain_address, tls=False).list_models()

        # Anywhere else: refused before anything is sent, as the C++ client does.
        for address in ("192.0.2.1:50051", "sl-0.example:50051",
                        f"{self.plain_address},192.0.2.1:50051"):
            with self.subTest(address=address):
                with self.assertRaises(errors.TokenInClear) as e:
                    streamlearn.Client(address, token=self.tokens["acme-admin"],
                                       connect_timeout=None)
                self.assertIsInstance(e.exception, ValueError)
                self.assertIsInstance(e.exception, errors.FailedPrecondition)
                self.assertIn("refusing to send a token in clear to ", e.exception.message)
                self.assertNotIn(self.tokens["acme-admin"], str(e.exception))
        # The same address with TLS, or without a token, is fine (lazily: nothing listens).
        streamlearn.Client("192.0.2.1:50051", token=self.tokens["acme-admin"],
                           tls_ca=self.cert("ca.crt"), connect_timeout=None).close()
        streamlearn.Client("192.0.2.1:50051", token="", connect_timeout=None).close()


if __name__ == "__main__":
    args = harness.parse_args()
    unittest.main(argv=args.unittest_argv, verbosity=2)
