// Annotated locks: thin wrappers over std::mutex, std::condition_variable and a
// writer-preferring pthread rwlock that carry clang's thread-safety attributes, so that a
// build with -Wthread-safety (scripts/test.sh, pass "clang-tsan") proves at compile time that
// every member marked ABSL_GUARDED_BY(mu_) is touched only with mu_ held (docs/DECISIONS.md,
// "Locking"). libstdc++'s own std::mutex carries no attributes, so std::lock_guard is not checked.
//
//   class Counter {
//    public:
//     void Add(int n) ABSL_LOCKS_EXCLUDED(mu_) {
//       MutexLock lock(&mu_);
//       total_ += n;
//       cv_.SignalAll();
//     }
//     int AwaitAtLeast(int n) ABSL_LOCKS_EXCLUDED(mu_) {
//       MutexLock lock(&mu_);
//       while (total_ < n) cv_.Wait(&mu_);   // spurious wake-ups: always wait in a loop
//       return total_;
//     }
//    private:
//     int TotalLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return total_; }
//     mutable Mutex mu_;
//     CondVar cv_;                           // signalled when total_ grows
//     int total_ ABSL_GUARDED_BY(mu_) = 0;
//   };
//
//   WriterFirstRwLock rw_;
//   { ReaderLock r(&rw_); ... }              // shared: any number of readers
//   { WriterLock w(&rw_); ... }              // exclusive; a waiting writer goes before new readers
//
// Every method is inline and does what the wrapped standard call does: under gcc (where the
// attributes expand to nothing) the types cost exactly what std::mutex and
// std::condition_variable cost. A Mutex is not recursive.
//
// Thread safety: these are the synchronisation primitives; every method is thread-safe.
#ifndef STREAMLEARN_CORE_COMMON_MUTEX_H_
#define STREAMLEARN_CORE_COMMON_MUTEX_H_

#include <pthread.h>

#include <cassert>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace streamlearn {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

  // Tells the analysis that the calling thread holds this mutex. Not checked at run time
  // (std::mutex cannot tell who holds it): use it only where the analysis cannot follow.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable used with a Mutex (std::condition_variable underneath, so no extra
// lock as std::condition_variable_any would take). Waits may wake spuriously: re-check the
// condition in a loop.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases *mu while it waits; holds it again on return.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // *mu stays held, by the caller
  }

  // As Wait, until `deadline` at the latest. False when the deadline passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A reader-writer lock that lets a waiting writer in before new readers (a pthread rwlock of
// kind PREFER_WRITER_NONRECURSIVE). std::shared_mutex on glibc prefers readers, so readers in
// a loop can starve the writer (measured in core/shard/fuse_shard.h, its one user).
class ABSL_LOCKABLE WriterFirstRwLock {
 public:
  WriterFirstRwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    const int rc = pthread_rwlock_init(&lock_, &attr);
    assert(rc == 0);
    (void)rc;
    pthread_rwlockattr_destroy(&attr);
  }
  ~WriterFirstRwLock() { pthread_rwlock_destroy(&lock_); }
  WriterFirstRwLock(const WriterFirstRwLock&) = delete;
  WriterFirstRwLock& operator=(const WriterFirstRwLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { pthread_rwlock_wrlock(&lock_); }
  void unlock() ABSL_UNLOCK_FUNCTION() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

// Holds a WriterFirstRwLock exclusively for its scope.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(WriterFirstRwLock* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->lock();
  }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  WriterFirstRwLock* const mu_;
};

// Holds a WriterFirstRwLock shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(WriterFirstRwLock* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->lock_shared();
  }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  WriterFirstRwLock* const mu_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_MUTEX_H_
