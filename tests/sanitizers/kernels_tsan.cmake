# Included by the top CMakeLists.txt with ROOTSPEC_KERNELS_TSAN=ON: tests/run's third build
# (build-tsan, clang): kernels/cuda executed on the CPU under ThreadSanitizer, every CUDA thread a
# fiber that ThreadSanitizer sees as a thread (kernels/cuda_on_cpu/block_runner.h), so that two
# threads of a block that no barrier orders are a data race report: the kernels' tests, and the
# planted removed barrier that must be reported (tests/planted).
add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
add_link_options(-fsanitize=thread)
add_compile_definitions(ROOTSPEC_SANITIZED=1)
set(ROOTSPEC_CUDA_ON_CPU ON)
set(ROOTSPEC_WITH_CUDA ON)
set(ROOTSPEC_WITH_TORCH OFF)
find_package(Threads REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(spdlog REQUIRED)
find_package(GTest REQUIRED)
include(GoogleTest)
enable_testing()
set(ROOTSPEC_TEST_ENVIRONMENT "ROOTSPEC_CUDA_ON_CPU_DEVICES=2")
add_subdirectory(base)
add_subdirectory(common/grammar)  # rootspec_speculation links it (the processed law's grammar mask)
add_subdirectory(common/speculation)
add_subdirectory(kernels)
add_subdirectory(common/model)  # rootspec_model_files only
add_subdirectory(tests/kernels)
add_subdirectory(tests/planted)
