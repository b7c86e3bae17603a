// VersionedCell<T>: one writer publishes immutable versions of a value; readers pin the current
// version without locks and never wait (docs/DECISIONS.md, "Versions").
//
//   VersionedCell<State> cell(initial);
//   { auto pin = cell.Read(); Use(*pin); }      // any thread, lock-free
//   T* next = cell.BeginWrite();                 // the writer: a private copy of the current
//   Mutate(*next); cell.Publish(next);           // one seq_cst store makes it current
//   T* next = cell.BeginWriteWith(fill);         // or: the writer completes the copy
//
// Versions live in slots that are reused, never freed while the cell lives: a slot is handed
// to the writer only when it is not current and no reader holds it. A reader increments the
// slot's count and then re-checks that the slot is still current; with sequentially consistent
// operations on both sides, a writer that sees a zero count after un-publishing a slot knows
// that no reader can use it. When every old slot is pinned the writer takes a new slot instead
// of waiting, so the number of slots is bounded by the number of concurrent readers plus two.
//
// Thread safety: Read() from any thread; BeginWrite/Publish/Current from one writer at a time
// (callers serialise writers).
#ifndef STREAMLEARN_CORE_COMMON_VERSIONED_CELL_H_
#define STREAMLEARN_CORE_COMMON_VERSIONED_CELL_H_

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace streamlearn {

template <typename T>
class VersionedCell {
 private:
  struct Slot {
    std::atomic<int64_t> readers{0};
    std::optional<T> value;
  };

 public:
  explicit VersionedCell(T initial) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->value.emplace(std::move(initial));
    current_.store(slots_.back().get(), std::memory_order_seq_cst);
  }
  VersionedCell(const VersionedCell&) = delete;
  VersionedCell& operator=(const VersionedCell&) = delete;

  // A pinned version; the value stays valid and unchanged until the pin is destroyed.
  class Pin {
   public:
    Pin(Pin&& o) noexcept : slot_(o.slot_) { o.slot_ = nullptr; }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() {
      if (slot_ != nullptr) slot_->readers.fetch_sub(1, std::memory_order_seq_cst);
    }
    const T& operator*() const { return *slot_->value; }
    const T* operator->() const { return &*slot_->value; }

   private:
    friend class VersionedCell;
    explicit Pin(Slot* s) : slot_(s) {}
    Slot* slot_;
  };

  Pin Read() const {
    for (;;) {
      Slot* s = current_.load(std::memory_order_seq_cst);
      s->readers.fetch_add(1, std::memory_order_seq_cst);
      if (current_.load(std::memory_order_seq_cst) == s) return Pin(s);
      s->readers.fetch_sub(1, std::memory_order_seq_cst);  // raced with a publish; retry
    }
  }

  // The writer's view of the current version (no pin needed: only the writer replaces it).
  const T& Current() const { return *current_.load(std::memory_order_relaxed)->value; }

  // A private slot holding a copy of the current version. REQUIRES: single writer.
  T* BeginWrite() {
    return BeginWriteWith([](const T& cur, T* slot) { *slot = cur; });
  }

  // BeginWrite for a writer that completes the copy itself: a reused slot (it holds an older
  // version, and its buffers) is handed to `fill(current, slot)`, which copies what the writer
  // will not overwrite from `current` before it publishes; a new slot gets a whole copy. For a
  // state whose update reads every byte of the big part and writes it anew, the copy of that
  // part is then the update itself (SauShard::Ingest). REQUIRES: single writer.
  template <typename Fill>
  T* BeginWriteWith(Fill&& fill) {
    Slot* cur = current_.load(std::memory_order_relaxed);
    Slot* free_slot = nullptr;
    for (auto& s : slots_) {
      if (s.get() != cur && s->readers.load(std::memory_order_seq_cst) == 0) {
        free_slot = s.get();
        break;
      }
    }
    if (free_slot == nullptr) {
      slots_.push_back(std::make_unique<Slot>());
      free_slot = slots_.back().get();
    }
    if (free_slot->value.has_value()) {
      fill(*cur->value, &*free_slot->value);  // reuses the slot's buffers
    } else {
      free_slot->value.emplace(*cur->value);
    }
    pending_ = free_slot;
    return &*free_slot->value;
  }

  // Makes the slot from the last BeginWrite current. REQUIRES: single writer.
  void Publish(T* value) {
    assert(pending_ != nullptr && &*pending_->value == value);
    current_.store(pending_, std::memory_order_seq_cst);
    pending_ = nullptr;
  }

  size_t slot_count() const { return slots_.size(); }

 private:
  std::vector<std::unique_ptr<Slot>> slots_;  // writer-owned
  std::atomic<Slot*> current_{nullptr};
  Slot* pending_ = nullptr;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_VERSIONED_CELL_H_
