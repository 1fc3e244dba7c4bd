# rootspec_test_programs_library(): the library behind tests/support/programs.h, for every program
# of this configuration that tests start. Only its one unit holds the build's paths (written into
# program_paths.inc here), so that the tests compile alike in each clone and hit the compiler cache.
function(rootspec_test_programs_library)
  set(entries "")
  foreach(program rootspec-target rootspec-drafter rootspec-http rootspec-client rootspec-tokenize rootspec-sim)
    if(TARGET ${program})
      string(APPEND entries "{\"${program}\", \"$<TARGET_FILE:${program}>\"},\n")
    endif()
  endforeach()
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/test_programs)
  file(GENERATE OUTPUT ${generated}/program_paths.inc CONTENT "${entries}")
  add_library(rootspec_test_programs STATIC ${PROJECT_SOURCE_DIR}/tests/support/programs.cpp)
  target_include_directories(rootspec_test_programs PUBLIC ${PROJECT_SOURCE_DIR}/tests/support
                             PRIVATE ${generated})
  target_compile_definitions(rootspec_test_programs PRIVATE ROOTSPEC_BUILD_DIR="${PROJECT_BINARY_DIR}")
endfunction()
