#include "core/lmu/lmu_base.h"

#include "absl/strings/str_format.h"

namespace streamlearn::lmu {

absl::StatusOr<std::shared_ptr<const LmuBase>> LmuBase::Build(std::span<const BaseEntry> entries,
                                                              const HashSecret& secret,
                                                              uint64_t generation) {
  std::vector<uint64_t> ids;
  ids.reserve(entries.size());
  for (const BaseEntry& e : entries) ids.push_back(e.id);
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < kSaltAttempts; ++attempt) {
    Mphf::Options options;
    options.key_hash = KeyHashOf(attempt);
    absl::StatusOr<Mphf> mphf = Mphf::Build(ids, Salt(secret, generation, attempt), options);
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
