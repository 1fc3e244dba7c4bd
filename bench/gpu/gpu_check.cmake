# Included by the top CMakeLists.txt with ROOTSPEC_GPU_CHECK=ON: the build of
# bench/gpu/device-check.sh on a GPU machine that has nvcc, CMake and ninja but none of our Debian
# packages (no libtorch). It builds what runs torch-free: kernels/cuda, the plain-C++ libraries
# (common/*, kernels/cpu, the model runtime with the Cuda and LoopCpu backends), the two daemons,
# the GPU tests (tests/kernels, tests/model/test_cuda_backend.cpp, the daemons' greedy identity
# of tests/daemon/test_pipeline.cpp and test_gpu_pair.cpp) and the GPU bench tools (bench/gpu).
# From .cache/gpu-carry (bench/gpu/prepare.sh): GoogleTest's source and the header-only
# libraries; from ROOTSPEC_GPU_DEPS (device-check.sh builds them from the carried sources):
# static ZeroMQ and PCRE2.
# With ROOTSPEC_CUDA_ON_CPU (device-check.sh --dry-run) the same build executes CUDA on the CPU
# (kernels/cuda_on_cpu) and needs no nvcc.
if(NOT ROOTSPEC_CUDA_ON_CPU)
  rootspec_enable_cuda()
endif()
find_package(Threads REQUIRED)
set(ROOTSPEC_WITH_CUDA ON)
set(ROOTSPEC_WITH_TORCH OFF)
set(ROOTSPEC_TEST_ENVIRONMENT "")

set(ROOTSPEC_GPU_CARRY "${PROJECT_SOURCE_DIR}/.cache/gpu-carry" CACHE PATH "bench/gpu/prepare.sh's folder")
set(ROOTSPEC_GPU_DEPS "${CMAKE_BINARY_DIR}/deps" CACHE PATH "static ZeroMQ and PCRE2 (device-check.sh)")
set(carried_headers ${ROOTSPEC_GPU_CARRY}/include)
if(NOT EXISTS ${carried_headers}/nlohmann/json.hpp)
  message(FATAL_ERROR "ROOTSPEC_GPU_CHECK: ${carried_headers} lacks the carried headers (bench/gpu/prepare.sh)")
endif()
# The packages the main build finds, as the targets it links, over the carried headers.
# header_only_library(TARGET [DEFINITIONS…])
function(header_only_library target)
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE ${carried_headers})
  if(ARGN)
    target_compile_definitions(${target} INTERFACE ${ARGN})
  endif()
endfunction()
header_only_library(nlohmann_json::nlohmann_json)
header_only_library(CLI11::CLI11)
header_only_library(tomlplusplus::tomlplusplus)
header_only_library(msgpackc-cxx)
# Debian's spdlog is built for an external fmt (its tweakme.h): both used header-only here.
header_only_library(spdlog::spdlog SPDLOG_HEADER_ONLY FMT_HEADER_ONLY)
# static_library(TARGET NAME): lib<NAME>.a from ROOTSPEC_GPU_DEPS.
function(static_library target name)
  find_library(${name}_path NAMES lib${name}.a PATHS ${ROOTSPEC_GPU_DEPS}/lib NO_DEFAULT_PATH)
  if(NOT ${name}_path)
    message(FATAL_ERROR "ROOTSPEC_GPU_CHECK: no lib${name}.a in ${ROOTSPEC_GPU_DEPS}/lib (device-check.sh builds it)")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE ${ROOTSPEC_GPU_DEPS}/include ${carried_headers})
  target_link_libraries(${target} INTERFACE ${${name}_path} Threads::Threads)
endfunction()
static_library(PkgConfig::ZMQ zmq)
target_link_libraries(PkgConfig::ZMQ INTERFACE rt)
static_library(PkgConfig::PCRE2 pcre2-8)
target_compile_definitions(PkgConfig::PCRE2 INTERFACE PCRE2_STATIC)

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

add_subdirectory(base)
add_subdirectory(kernels)
add_subdirectory(common)  # grammar, speculation, text, ipc, config
add_subdirectory(common/model)
add_subdirectory(target_proc)
add_subdirectory(drafter_proc)
add_subdirectory(tests/kernels)
include(${PROJECT_SOURCE_DIR}/tests/support/programs.cmake)
rootspec_test_programs_library()
add_executable(model_test_cuda_backend ${PROJECT_SOURCE_DIR}/tests/model/test_cuda_backend.cpp)
target_link_libraries(model_test_cuda_backend PRIVATE rootspec_model GTest::gtest GTest::gtest_main)
target_include_directories(model_test_cuda_backend PRIVATE ${PROJECT_SOURCE_DIR}/tests/support
                                                           ${PROJECT_SOURCE_DIR}/tests/model)
add_subdirectory(bench/gpu)
foreach(name pipeline gpu_pair)
  add_executable(daemon_test_${name} ${PROJECT_SOURCE_DIR}/tests/daemon/test_${name}.cpp)
  target_link_libraries(daemon_test_${name} PRIVATE rootspec_model rootspec_ipc rootspec_config
                        rootspec_test_programs GTest::gtest GTest::gtest_main)
  target_include_directories(daemon_test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  add_dependencies(daemon_test_${name} rootspec-target rootspec-drafter)
endforeach()
