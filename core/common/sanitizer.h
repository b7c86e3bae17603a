// Whether this translation unit is built under AddressSanitizer or ThreadSanitizer (gcc names
// it with __SANITIZE_*__, clang with __has_feature). Tests that read glibc's own heap
// statistics (mallinfo2) skip those checks there: a sanitizer's allocator does not report to
// glibc.
#ifndef STREAMLEARN_CORE_COMMON_SANITIZER_H_
#define STREAMLEARN_CORE_COMMON_SANITIZER_H_

namespace streamlearn {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_SANITIZER_H_
