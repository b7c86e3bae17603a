// WeightArena: the LMU's weights, m doubles per slot, in fixed-size chunks that never move.
//
// A key's slot is assigned once, when the key is first inserted, and keeps its weights for
// the life of the model: a rebuild remaps keys to slots (base and delta hold (id, slot)) but
// never copies a weight, so an update made during a rebuild cannot be lost (docs/LMU.md).
//
// One writer appends rows and stores weights; readers load weights concurrently. Every access
// goes through std::atomic_ref with relaxed order (plain moves on x86-64), so a reader sees
// each double whole, old or new. The chunk directory is allocated once (kMaxChunks entries)
// and chunk pointers are published with release/acquire, so readers never see a dangling row.
#ifndef STREAMLEARN_CORE_LMU_WEIGHT_ARENA_H_
#define STREAMLEARN_CORE_LMU_WEIGHT_ARENA_H_

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>

namespace streamlearn::lmu {

class WeightArena {
 public:
  static constexpr int kChunkBits = 16;
  static constexpr uint64_t kChunkRows = uint64_t{1} << kChunkBits;
  static constexpr uint64_t kMaxChunks = uint64_t{1} << 16;  // 2^32 slots

  explicit WeightArena(int m) : m_(m), chunks_(new std::atomic<double*>[kMaxChunks]) {
    for (uint64_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
  }
  ~WeightArena() {
    for (uint64_t i = 0; i < kMaxChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
  }
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;

  int m() const { return m_; }
  uint64_t size() const { return size_.load(std::memory_order_acquire); }

  // Writer: a new zeroed row; returns its slot.
  uint64_t Append() {
    const uint64_t slot = size_.load(std::memory_order_relaxed);
    const uint64_t chunk = slot >> kChunkBits;
    assert(chunk < kMaxChunks);
    if (chunks_[chunk].load(std::memory_order_relaxed) == nullptr) {
      chunks_[chunk].store(new double[kChunkRows * m_](), std::memory_order_release);
    }
    size_.store(slot + 1, std::memory_order_release);
    return slot;
  }

  // REQUIRES: slot < size() (as observed by the caller).
  double Load(uint64_t slot, int j) const {
    return std::atomic_ref<double>(Row(slot)[j]).load(std::memory_order_relaxed);
  }
  // Writer only.
  void Store(uint64_t slot, int j, double w) {
    std::atomic_ref<double>(Row(slot)[j]).store(w, std::memory_order_relaxed);
  }

  // A hint that the row of `slot` will be read soon.
  void Prefetch(uint64_t slot) const { __builtin_prefetch(Row(slot)); }

  // The row of `slot` (its m weights), for a caller that reads or writes a row several times:
  // it stays where it is for the arena's life. Read and write it through LoadAt and StoreAt.
  // REQUIRES: slot < size() (as observed by the caller).
  double* RowOf(uint64_t slot) const { return Row(slot); }
  static double LoadAt(const double* w) {
    // atomic_ref of a const type is C++26; a load through the plain type writes nothing.
    return std::atomic_ref<double>(*const_cast<double*>(w)).load(std::memory_order_relaxed);
  }
  // Writer only.
  static void StoreAt(double* w, double value) {
    std::atomic_ref<double>(*w).store(value, std::memory_order_relaxed);
  }

  size_t bytes() const {
    const uint64_t chunks = (size() + kChunkRows - 1) >> kChunkBits;
    return chunks * kChunkRows * m_ * sizeof(double) + kMaxChunks * sizeof(void*);
  }

 private:
  double* Row(uint64_t slot) const {
    double* chunk = chunks_[slot >> kChunkBits].load(std::memory_order_acquire);
    return chunk + (slot & (kChunkRows - 1)) * m_;
  }

  const int m_;
  std::unique_ptr<std::atomic<double*>[]> chunks_;
  std::atomic<uint64_t> size_{0};
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_WEIGHT_ARENA_H_
