#include "core/lmu/lmu_base.h"

#include "absl/strings/str_format.h"

namespace streamlearn::lmu {

namespace {
// Salt attempts per generation; the first kFoldAttempts build on FoldHash, the rest on
// SipHash-1-3 (docs/LMU_MPHF.md, "Why a weaker hash is safe here"). A build fails by chance as
// rarely on either hash (15 of 120,000 builds of small sets, the placement's own failure rate),
// so the fallback is for ids chosen against the FoldHash salts, which takes knowing them.
constexpr int kSaltAttempts = 8;
constexpr int kFoldAttempts = 2;
}  // namespace

absl::StatusOr<std::shared_ptr<const LmuBase>> LmuBase::Build(std::span<const BaseEntry> entries,
                                                              const HashSecret& secret,
                                                              uint64_t generation) {
  std::vector<uint64_t> ids;
  ids.reserve(entries.size());
  for (const BaseEntry& e : entries) ids.push_back(e.id);
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < kSaltAttempts; ++attempt) {
    const HashKey salt =
        DeriveHashKey(secret, HashPurpose::kMphf, generation * kSaltAttempts + attempt);
    Mphf::Options options;
    options.key_hash = attempt < kFoldAttempts ? Mphf::KeyHash::kFold : Mphf::KeyHash::kSipHash13;
    absl::StatusOr<Mphf> mphf = Mphf::Build(ids, salt, options);
    if (!mphf.ok()) {
      if (absl::IsInvalidArgument(mphf.status())) return mphf.status();
      last = mphf.status();
      continue;
    }
    auto base = std::make_shared<LmuBase>();
    base->generation_ = generation;
    base->mphf_ = *std::move(mphf);
    base->entries_.resize(entries.size());
    for (const BaseEntry& e : entries) base->entries_[base->mphf_(e.id)] = e;
    return std::shared_ptr<const LmuBase>(std::move(base));
  }
  return absl::InternalError(absl::StrFormat(
      "no MPHF found for %d ids after %d salts: %s", entries.size(), kSaltAttempts, last.message()));
}

absl::Status LmuBase::CheckMembership() const {
  for (size_t pos = 0; pos < entries_.size(); ++pos) {
    const uint64_t h = mphf_(entries_[pos].id);
    if (h != pos) {
      return absl::DataLossError(absl::StrFormat(
          "LMU base generation %d: id %d is stored at position %d but hashes to %d "
          "(Keys_base[h(id)] != id)",
          generation_, entries_[pos].id, pos, h));
    }
  }
  return absl::OkStatus();
}

}  // namespace streamlearn::lmu
