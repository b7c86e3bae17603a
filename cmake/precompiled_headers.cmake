# Precompiled headers (STREAMLEARN_PCH): the headers of the standard library, Abseil,
# protobuf, gRPC, GoogleTest and our generated protocol, parsed once per target instead of
# once per file. They are used where they pay: the CLI and the tests, whose files are mostly
# headers and test macros (clang -ftime-trace: 3.6 s of a 4.2 s file were headers). The
# libraries do without: the files of the server, storage and client libraries spend their time
# in code generation (persistence.cc under ASan: 8.5 s of 11.5 in the backend), and a
# precompiled header of their own cost more than it saved; the sanitizer and fuzz builds make
# them unity builds instead (scripts/test.sh). The sources still include what they use: the
# Release build compiles every library file on its own, without a precompiled header.
#
# The sets, each a superset of the one before, so that a target is given only what its layout
# allows (docs/DECISIONS.md, "Layout": core/ has no protobuf, storage no gRPC):
#   core      the standard library and Abseil's status and strings
#   messages  + protobuf and the generated messages (*.pb.h)
#   grpc      + gRPC and the generated stubs (*.grpc.pb.h)
# and TEST adds GoogleTest (GMOCK gMock) to any of them.

set(STREAMLEARN_PCH_CORE
  <algorithm> <array> <atomic> <bit> <chrono> <cmath> <cstddef> <cstdint> <cstdio> <cstdlib>
  <cstring> <functional> <limits> <map> <memory> <mutex> <optional> <random> <set> <span>
  <string> <string_view> <utility> <vector>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>)
set(STREAMLEARN_PROTO_NAMES common admin sau lmu audit fuse journal health)
set(STREAMLEARN_PCH_MESSAGES ${STREAMLEARN_PCH_CORE} <filesystem> <fstream> <sstream>
  <google/protobuf/message.h>)
set(STREAMLEARN_PCH_GRPC)
foreach(p ${STREAMLEARN_PROTO_NAMES})
  list(APPEND STREAMLEARN_PCH_MESSAGES ${CMAKE_BINARY_DIR}/gen/${p}.pb.h)
  list(APPEND STREAMLEARN_PCH_GRPC ${CMAKE_BINARY_DIR}/gen/${p}.grpc.pb.h)
endforeach()
set(STREAMLEARN_PCH_GRPC ${STREAMLEARN_PCH_MESSAGES} <thread> <iostream> <grpcpp/grpcpp.h>
  ${STREAMLEARN_PCH_GRPC})

# streamlearn_precompile(<target> <core|messages|grpc> [TEST] [GMOCK]): <target>'s own
# precompiled header of that set.
function(streamlearn_precompile target set)
  if(NOT STREAMLEARN_PCH)
    return()
  endif()
  cmake_parse_arguments(ARG "TEST;GMOCK" "" "" ${ARGN})
  string(TOUPPER ${set} upper)
  set(headers ${STREAMLEARN_PCH_${upper}})
  if(NOT headers)
    message(FATAL_ERROR "streamlearn_precompile: no header set '${set}'")
  endif()
  if(ARG_TEST)
    list(APPEND headers <gtest/gtest.h>)
  endif()
  if(ARG_GMOCK)
    list(APPEND headers <gmock/gmock.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# streamlearn_precompile_like(<target> <owner>): <target> uses <owner>'s precompiled header,
# built once for both; the two must have the same compile flags and definitions (the
# integration tests of tests/CMakeLists.txt do).
function(streamlearn_precompile_like target owner)
  if(STREAMLEARN_PCH)
    target_precompile_headers(${target} REUSE_FROM ${owner})
  endif()
endfunction()
