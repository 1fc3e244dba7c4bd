# Included by the top CMakeLists.txt with ROOTSPEC_GPU_CHECK=ON: the build of
# bench/gpu/device-check.sh on a GPU machine that has nvcc, CMake and ninja but none of our Debian
# packages (no libtorch, no ZeroMQ). It builds what runs torch-free: kernels/cuda, the plain-C++
# libraries (common/spec, kernels/cpu, the model runtime with the Cuda backend only), the GPU
# tests (tests/kernels, tests/model/test_cuda_backend.cpp) and the GPU bench tools (bench/gpu).
# GoogleTest's source and nlohmann/json's headers come from .cache/gpu-carry (bench/gpu/prepare.sh).
rootspec_enable_cuda()
find_package(Threads REQUIRED)
set(ROOTSPEC_WITH_CUDA ON)
set(ROOTSPEC_WITH_TORCH OFF)

# common/base without spdlog: nothing built here logs.
add_library(rootspec_base INTERFACE)
target_include_directories(rootspec_base INTERFACE ${PROJECT_SOURCE_DIR}/common/base)

set(ROOTSPEC_GPU_CARRY "${PROJECT_SOURCE_DIR}/.cache/gpu-carry" CACHE PATH "bench/gpu/prepare.sh's folder")
find_package(nlohmann_json QUIET)
if(NOT nlohmann_json_FOUND)
  add_library(nlohmann_json INTERFACE)
  target_include_directories(nlohmann_json INTERFACE ${ROOTSPEC_GPU_CARRY}/include)
  add_library(nlohmann_json::nlohmann_json ALIAS nlohmann_json)
endif()
set(ROOTSPEC_GTEST_SOURCE "${ROOTSPEC_GPU_CARRY}/googletest" CACHE PATH "GoogleTest's source folder")
if(EXISTS ${ROOTSPEC_GTEST_SOURCE}/CMakeLists.txt)
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
add_subdirectory(common/model)
add_subdirectory(tests/kernels)
add_executable(model_test_cuda_backend ${PROJECT_SOURCE_DIR}/tests/model/test_cuda_backend.cpp)
target_link_libraries(model_test_cuda_backend PRIVATE rootspec_model GTest::gtest GTest::gtest_main)
target_include_directories(model_test_cuda_backend PRIVATE ${PROJECT_SOURCE_DIR}/tests/support
                                                           ${PROJECT_SOURCE_DIR}/tests/model)
add_subdirectory(bench/gpu)
