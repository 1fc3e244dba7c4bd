# Included by the top CMakeLists.txt with ROOTSPEC_KERNELS_ONLY=ON: the build of
# bench/gpu/device-check.sh on a GPU machine that has nvcc, CMake and ninja but none of our Debian
# packages. kernels/cuda, what its GPU tests compare with (kernels/cpu, common/spec: plain C++),
# GoogleTest built from the source the check carries (bench/gpu/prepare.sh), the GPU tests
# (tests/kernels) and the kernel timing (bench/gpu).
rootspec_enable_cuda()
find_package(Threads REQUIRED)
set(ROOTSPEC_WITH_CUDA ON)

# common/base without spdlog: kernels/cpu and common/spec do not log.
add_library(rootspec_base INTERFACE)
target_include_directories(rootspec_base INTERFACE ${PROJECT_SOURCE_DIR}/common/base)

set(ROOTSPEC_GTEST_SOURCE "" CACHE PATH "GoogleTest's source folder (Debian: /usr/src/googletest)")
if(ROOTSPEC_GTEST_SOURCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  add_subdirectory(${ROOTSPEC_GTEST_SOURCE} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  if(NOT TARGET GTest::gtest)  # GoogleTest ≥ 1.11 defines these itself
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
else()
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)
enable_testing()

add_subdirectory(common/spec)
add_subdirectory(kernels)
add_subdirectory(tests/kernels)
add_subdirectory(bench/gpu)
