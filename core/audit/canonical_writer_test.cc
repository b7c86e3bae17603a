// CanonicalObjectWriter, EnvelopeLine / MerkleChain::AppendCanonical and
// AuditLogWriter::AppendCanonical / Resume against the AuditRecord path they shortcut: the
// bytes must be identical, since they are hashed.
#include "core/audit/canonical_writer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/audit/audit_record.h"
#include "core/audit/checkpoint.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/verifier.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

const Ed25519PrivateKey& Key() {
  static const Ed25519PrivateKey* k = new Ed25519PrivateKey(*Ed25519PrivateKey::Generate());
  return *k;
}

// Doubles that stress the shortest-round-trip text: random bit patterns (all exponents,
// subnormals included), signed zeros, the extremes, integers that print without '.', and
// powers of ten where to_chars switches to exponent form.
double RandomFiniteDouble(std::mt19937_64& rng) {
  static const double kSpecial[] = {0.0,
                                    -0.0,
                                    1.0,
                                    -1.0,
                                    0.1,
                                    1e21,
                                    1e22,
                                    -1e-7,
                                    123456789.0,
                                    9007199254740993.0,  // 2^53 + 1 rounds to 2^53
                                    std::numeric_limits<double>::max(),
                                    std::numeric_limits<double>::lowest(),
                                    std::numeric_limits<double>::min(),
                                    std::numeric_limits<double>::denorm_min(),
                                    -std::numeric_limits<double>::denorm_min(),
                                    std::numeric_limits<double>::epsilon()};
  switch (rng() % 4) {
    case 0:
      return kSpecial[rng() % std::size(kSpecial)];
    case 1: {  // subnormal: exponent bits zero
      const uint64_t bits = (rng() & 0x800FFFFFFFFFFFFFULL);
      return std::bit_cast<double>(bits);
    }
    case 2:  // a small integer-valued double (prints without '.', so ".0" is appended)
      return static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000);
    default:
      for (;;) {
        const double x = std::bit_cast<double>(rng());
        if (std::isfinite(x)) return x;
      }
  }
}

std::string RandomAscii(std::mt19937_64& rng, size_t min_len, size_t max_len) {
  const size_t n = min_len + rng() % (max_len - min_len + 1);
  std::string s;
  while (s.size() < n) {
    const char c = static_cast<char>(0x20 + rng() % 95);  // printable ASCII
    if (c != '"' && c != '\\') s.push_back(c);
  }
  return s;
}

// One field: the writer call and the equivalent AuditValue, plus the value the parser gives
// back (a uint64 that fits int64 reads back as an int64; a non-finite double is a string).
struct Field {
  std::string key;
  AuditValue value;     // what EncodeCanonical is given
  AuditValue parsed;    // what ParseAuditJson returns
  std::string raw;      // for nested values: their canonical text
  double d = 0;         // for doubles: what the writer is given
  enum Kind { kUint, kInt, kDouble, kBool, kString, kRaw } kind = kInt;
};

AuditRecord RandomRecord(std::mt19937_64& rng, int depth);

Field RandomField(std::mt19937_64& rng, std::string key, int depth) {
  Field f;
  f.key = std::move(key);
  const int pick = static_cast<int>(rng() % (depth > 0 ? 7 : 5));
  switch (pick) {
    case 0: {
      static const uint64_t kU[] = {0, 1, 9, 10, std::numeric_limits<uint64_t>::max(),
                                    uint64_t{1} << 63, (uint64_t{1} << 63) - 1};
      const uint64_t x = rng() % 2 ? kU[rng() % std::size(kU)] : rng();
      f.kind = Field::kUint;
      f.value = x;
      f.parsed = x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                     ? AuditValue(static_cast<int64_t>(x))
                     : AuditValue(x);
      break;
    }
    case 1: {
      static const int64_t kI[] = {0, -1, 1, std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min() + 1};
      const int64_t x = rng() % 2 ? kI[rng() % std::size(kI)] : static_cast<int64_t>(rng());
      f.kind = Field::kInt;
      f.value = x;
      f.parsed = x;
      break;
    }
    case 2: {
      f.kind = Field::kDouble;
      f.d = RandomFiniteDouble(rng);
      if (rng() % 10 == 0) {
        static const double kNonFinite[] = {std::numeric_limits<double>::quiet_NaN(),
                                            -std::numeric_limits<double>::quiet_NaN(),
                                            std::numeric_limits<double>::infinity(),
                                            -std::numeric_limits<double>::infinity()};
        f.d = kNonFinite[rng() % std::size(kNonFinite)];
      }
      // A non-finite double is written as its documented string.
      f.value = std::isfinite(f.d)
                    ? AuditValue(f.d)
                    : AuditValue(std::isnan(f.d) ? "NaN" : (f.d > 0 ? "Infinity" : "-Infinity"));
      f.parsed = f.value;
      break;
    }
    case 3:
      f.kind = Field::kBool;
      f.value = rng() % 2 == 0;
      f.parsed = f.value;
      break;
    case 4: {
      f.kind = Field::kString;
      std::string s = RandomAscii(rng, 0, 12);
      f.value = s;
      f.parsed = std::move(s);
      break;
    }
    case 5: {  // nested object
      f.kind = Field::kRaw;
      AuditRecord inner = RandomRecord(rng, depth - 1);
      f.raw = *EncodeCanonical(inner);
      f.parsed = *ParseAuditJson(f.raw);
      f.value = std::move(inner);
      break;
    }
    default: {  // a list of scalars and objects
      f.kind = Field::kRaw;
      AuditList list;
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        if (rng() % 2) {
          list.push_back(RandomRecord(rng, depth - 1));
        } else {
          list.push_back(AuditValue(static_cast<int64_t>(rng() % 100)));
        }
      }
      AuditRecord holder;
      holder.Set("x", list);
      const std::string text = *EncodeCanonical(holder);  // {"x":[...]}
      f.raw = text.substr(5, text.size() - 6);
      f.parsed = *ParseAuditJson(text)->Find("x");
      f.value = std::move(list);
      break;
    }
  }
  return f;
}

std::vector<std::string> SortedUniqueKeys(std::mt19937_64& rng, int n) {
  std::vector<std::string> keys;
  while (static_cast<int>(keys.size()) < n) {
    std::string k = RandomAscii(rng, 1, 8);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

AuditRecord RandomRecord(std::mt19937_64& rng, int depth) {
  AuditRecord r;
  for (const std::string& k : SortedUniqueKeys(rng, static_cast<int>(rng() % 4))) {
    r.Set(k, RandomField(rng, k, depth).value);
  }
  return r;
}

// Writes `fields` (keys ascending) with the writer.
std::string WriteFields(const std::vector<Field>& fields) {
  std::string out;
  CanonicalObjectWriter w(&out);
  for (const Field& f : fields) {
    switch (f.kind) {
      case Field::kUint:
        w.Uint(f.key, *f.value.get_if<uint64_t>());
        break;
      case Field::kInt:
        w.Int(f.key, *f.value.get_if<int64_t>());
        break;
      case Field::kDouble:
        w.Double(f.key, f.d);
        break;
      case Field::kBool:
        w.Bool(f.key, *f.value.get_if<bool>());
        break;
      case Field::kString:
        w.String(f.key, *f.value.get_if<std::string>());
        break;
      case Field::kRaw:
        w.Raw(f.key, f.raw);
        break;
    }
  }
  w.End();
  return out;
}

TEST(CanonicalObjectWriter, RandomRecordsEqualEncodeCanonicalAndParseBackStrictly) {
  std::mt19937_64 rng(20240611);
  for (int iter = 0; iter < 3000; ++iter) {
    SCOPED_TRACE(iter);
    std::vector<Field> fields;
    for (std::string& k : SortedUniqueKeys(rng, static_cast<int>(rng() % 12))) {
      fields.push_back(RandomField(rng, std::move(k), /*depth=*/2));
    }
    const std::string written = WriteFields(fields);

    AuditRecord as_record;  // what EncodeCanonical sees: non-finite doubles as their strings
    AuditRecord expected;   // what the strict parser must give back
    for (const Field& f : fields) {
      as_record.Set(f.key, f.value);
      expected.Set(f.key, f.parsed);
    }
    absl::StatusOr<std::string> canon = EncodeCanonical(as_record);
    ASSERT_TRUE(canon.ok()) << canon.status();
    ASSERT_EQ(written, *canon);

    absl::StatusOr<AuditRecord> back =
        ParseAuditJson(written, {.max_depth = 64, .require_canonical = true});
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << written;
    EXPECT_TRUE(*back == expected) << written;  // doubles compared bit for bit
  }
}

TEST(CanonicalObjectWriter, DocumentedExamplesAndNonFiniteStrings) {
  struct Case {
    const char* name;
    double x;
    const char* text;
  };
  const Case cases[] = {
      {"one", 1.0, "1.0"},
      {"minus zero", -0.0, "-0.0"},
      {"tenth", 0.1, "0.1"},
      {"1e21", 1e21, "1e+21"},
      {"smallest subnormal", 5e-324, "5e-324"},
      {"NaN", std::numeric_limits<double>::quiet_NaN(), "\"NaN\""},
      {"+Inf", std::numeric_limits<double>::infinity(), "\"Infinity\""},
      {"-Inf", -std::numeric_limits<double>::infinity(), "\"-Infinity\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string out;
    CanonicalObjectWriter w(&out);
    w.Double("x", c.x);
    w.End();
    EXPECT_EQ(out, std::string("{\"x\":") + c.text + "}");
    EXPECT_TRUE(ParseAuditJson(out, {.require_canonical = true}).ok()) << out;
  }
  std::string out;  // the example at the top of canonical_writer.h
  CanonicalObjectWriter w(&out);
  w.Uint("index", 7).String("kind", "step").Double("margin", 0.25);
  w.End();
  EXPECT_EQ(out, R"({"index":7,"kind":"step","margin":0.25})");
  std::string empty;
  CanonicalObjectWriter e(&empty);
  e.End();
  EXPECT_EQ(empty, "{}");
  EXPECT_EQ(*EncodeCanonical(AuditRecord{}), "{}");
}

std::vector<AuditRecord> StepBodies(std::mt19937_64& rng, int n) {
  std::vector<AuditRecord> bodies;
  for (int i = 0; i < n; ++i) {
    AuditRecord b = RandomRecord(rng, 2);
    b.Set("t", static_cast<int64_t>(i + 1)).Set("margin", 0.5);
    bodies.push_back(std::move(b));
  }
  return bodies;
}

TEST(MerkleChainCanonical, AppendCanonicalEqualsAppendThenEncode) {
  std::mt19937_64 rng(7);
  MerkleChain slow, fast;
  ASSERT_TRUE(slow.AppendGenesis("spec", Sha256Of("W")).ok());
  fast.AppendCanonical(*EncodeCanonical(GenesisBody("spec", Sha256Of("W"))));
  ASSERT_EQ(slow.head(), fast.head());
  for (const AuditRecord& body : StepBodies(rng, 300)) {
    absl::StatusOr<ChainEntry> e = slow.Append(body);
    ASSERT_TRUE(e.ok()) << e.status();
    const std::string canon = *EncodeCanonical(body);
    const std::string line = fast.AppendCanonical(canon);
    ASSERT_EQ(line, *EncodeCanonical(e->envelope));
    ASSERT_EQ(fast.head(), slow.head());
    ASSERT_EQ(fast.size(), slow.size());
    EXPECT_EQ(line, EnvelopeLine(canon, e->index, e->merkle_prev, e->merkle_curr));
  }
}

TEST(MerkleChainCanonical, EnvelopeLineAtTheIndexLimitsIsCanonical) {
  Digest prev{}, curr{};
  prev[31] = 0xff;
  curr[0] = 0x0a;
  for (uint64_t index : {uint64_t{0}, uint64_t{10}, std::numeric_limits<uint64_t>::max()}) {
    SCOPED_TRACE(index);
    const std::string line = EnvelopeLine("{\"k\":[1,{}]}", index, prev, curr);
    AuditRecord body;
    body.Set("k", AuditList{AuditValue(1), AuditValue(AuditRecord{})});
    AuditRecord env;
    env.Set("body", body).Set("index", index).Set("merkle_curr", ToHex(curr)).Set(
        "merkle_prev", ToHex(prev));
    EXPECT_EQ(line, *EncodeCanonical(env));
    EXPECT_TRUE(ParseAuditJson(line, {.require_canonical = true}).ok()) << line;
  }
}

TEST(AuditLogWriterCanonical, AppendCanonicalWritesTheSameLinesAsAppend) {
  std::mt19937_64 rng(11);
  const std::vector<AuditRecord> bodies = StepBodies(rng, 100);
  AuditLogWriter slow(Key(), 16), fast(Key(), 16);
  std::vector<std::string> a, b;
  ASSERT_TRUE(slow.AppendGenesis("spec", Sha256Of("W"), &a).ok());
  ASSERT_TRUE(fast.AppendCanonical(*EncodeCanonical(GenesisBody("spec", Sha256Of("W"))), &b).ok());
  for (const AuditRecord& body : bodies) {
    const size_t before = a.size();
    ASSERT_TRUE(slow.Append(body, &a).ok());
    ASSERT_TRUE(fast.AppendCanonical(*EncodeCanonical(body), &b).ok());
    ASSERT_EQ(a, b);  // the same line, and a checkpoint after it in the same places
    EXPECT_EQ(slow.since_checkpoint(), fast.since_checkpoint());
    EXPECT_EQ(a.size() - before, slow.since_checkpoint() == 0 ? 2u : 1u);
    // record_curr is the record's merkle_curr, also when a checkpoint followed it.
    const absl::StatusOr<AuditRecord> env = ParseAuditJson(a[before]);
    ASSERT_TRUE(env.ok());
    EXPECT_EQ(ToHex(fast.record_curr()), *env->Find("merkle_curr")->get_if<std::string>());
    EXPECT_EQ(slow.record_curr(), fast.record_curr());
  }
  EXPECT_EQ(slow.chain().head(), fast.chain().head());
  // 101 counted records with every = 16: checkpoints after records 16, 32, ..., 96.
  EXPECT_EQ(a.size(), 101u + 6u);
  AuditVerifier v({.public_key = &Key().PublicKey(), .checkpoint_every = 16});
  for (const std::string& line : b) ASSERT_TRUE(v.Feed(line).ok()) << v.Feed(line);
  EXPECT_TRUE(v.Finish().ok());
}

TEST(AuditLogWriterCanonical, FailedAppendLeavesTheWriterUnchanged) {
  AuditLogWriter w(Key(), 2);
  std::vector<std::string> lines;
  ASSERT_TRUE(w.AppendGenesis("spec", Sha256Of("W"), &lines).ok());
  const Digest head = w.chain().head();
  AuditRecord bad;
  bad.Set("margin", std::numeric_limits<double>::infinity());
  EXPECT_TRUE(absl::IsInvalidArgument(w.Append(bad, &lines)));
  EXPECT_EQ(lines.size(), 1u);
  EXPECT_EQ(w.chain().head(), head);
  EXPECT_EQ(w.chain().size(), 1u);
  EXPECT_EQ(w.since_checkpoint(), 1u);
}

// Writes genesis + `n` bodies, stopping after `split` of them; a second writer resumes from
// the first one's (size, head, since_checkpoint) and writes the rest.
struct ResumeCase {
  const char* name;
  int split;
  // What the resumed writer is told about records since the last checkpoint: the truth, or
  // every - 1 (what a journal that does not scan its log uses: an early checkpoint is allowed).
  bool since_is_exact;
};

TEST(AuditLogWriterCanonical, ResumedWriterContinuesAVerifiableChain) {
  constexpr uint64_t kEvery = 16;
  std::mt19937_64 rng(3);
  const std::vector<AuditRecord> bodies = StepBodies(rng, 120);
  const ResumeCase cases[] = {
      {"split mid-interval, exact count", 37, true},
      {"split mid-interval, conservative count", 37, false},
      {"split right after a checkpoint", 47, true},  // 48 counted records: checkpoint at 3 x 16
      {"split right after genesis", 0, false},
  };
  for (const ResumeCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> lines;
    AuditLogWriter first(Key(), kEvery);
    ASSERT_TRUE(first.AppendGenesis("spec", Sha256Of("W"), &lines).ok());
    for (int i = 0; i < c.split; ++i) ASSERT_TRUE(first.Append(bodies[i], &lines).ok());
    // What a reader recovers from the stored lines alone: the last line's index and head.
    absl::StatusOr<AuditRecord> last = ParseAuditJson(lines.back());
    ASSERT_TRUE(last.ok());
    uint64_t last_index = 0;
    ASSERT_TRUE(last->Find("index")->AsUint64(&last_index));
    Digest head;
    ASSERT_TRUE(ParseHexDigest(*last->Find("merkle_curr")->get_if<std::string>(), &head));
    ASSERT_EQ(last_index + 1, first.chain().size());
    ASSERT_EQ(head, first.chain().head());

    AuditLogWriter second(Key(), kEvery);
    second.Resume(last_index + 1, head, c.since_is_exact ? first.since_checkpoint() : kEvery - 1);
    for (size_t i = c.split; i < bodies.size(); ++i) {
      ASSERT_TRUE(second.Append(bodies[i], &lines).ok());
    }
    AuditVerifier v({.public_key = &Key().PublicKey(), .checkpoint_every = kEvery});
    for (const std::string& line : lines) ASSERT_TRUE(v.Feed(line).ok()) << v.Feed(line);
    EXPECT_TRUE(v.Finish().ok());
    if (c.since_is_exact) {  // the same lines as one uninterrupted writer
      std::vector<std::string> whole;
      AuditLogWriter one(Key(), kEvery);
      ASSERT_TRUE(one.AppendGenesis("spec", Sha256Of("W"), &whole).ok());
      for (const AuditRecord& b : bodies) ASSERT_TRUE(one.Append(b, &whole).ok());
      EXPECT_EQ(lines, whole);
    }
  }
}

TEST(AuditLogWriterCanonical, ResumeWithAnUndercountedIntervalBreaksTheCadence) {
  constexpr uint64_t kEvery = 16;
  std::mt19937_64 rng(5);
  const std::vector<AuditRecord> bodies = StepBodies(rng, 40);
  std::vector<std::string> lines;
  AuditLogWriter first(Key(), kEvery);
  ASSERT_TRUE(first.AppendGenesis("spec", Sha256Of("W"), &lines).ok());
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(first.Append(bodies[i], &lines).ok());
  ASSERT_EQ(first.since_checkpoint(), 10u);  // 26 counted, checkpoint after 16
  AuditLogWriter second(Key(), kEvery);
  second.Resume(first.chain().size(), first.chain().head(), /*since_checkpoint=*/0);
  for (int i = 25; i < 40; ++i) ASSERT_TRUE(second.Append(bodies[i], &lines).ok());
  AuditVerifier v({.public_key = &Key().PublicKey(), .checkpoint_every = kEvery});
  absl::Status st;
  for (const std::string& line : lines) {
    if (!(st = v.Feed(line)).ok()) break;
  }
  EXPECT_EQ(v.failed_rule(), AuditRule::kCheckpoint) << st;
  EXPECT_EQ(v.first_bad_index(), 33u);  // 16 counted records after the checkpoint at 17
}

}  // namespace
}  // namespace streamlearn
