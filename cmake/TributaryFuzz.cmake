# The libFuzzer targets (tests/fuzz/), built by clang in a build of their own so that the
# project's build stays GCC, and a smoke run of each as a ctest test (label `fuzz`): a few
# seconds from the checked-in corpus (tests/fuzz/corpus/<target>/). New inputs a smoke run
# finds go to a scratch folder of the build, never into the checked-in corpus.
#
# ON when a clang++ with libFuzzer's runtime is found (Debian: clang, libclang-rt-dev;
# scripts/deps.sh installs them); OFF skips the fuzz build and its tests.
option(TRIBUTARY_FUZZ "Build the libFuzzer targets with clang and smoke-run them in ctest" ON)
set(TRIBUTARY_FUZZ_SECONDS 3 CACHE STRING "Seconds each fuzzer runs in its ctest smoke test")
set(TRIBUTARY_FUZZERS frame data_handshake join_handshake control_codec membership journal codec)

function(tributary_add_fuzz_targets)
  if(NOT TRIBUTARY_FUZZ)
    return()
  endif()
  find_program(TRIBUTARY_CLANGXX NAMES clang++-14 clang++)
  if(NOT TRIBUTARY_CLANGXX)
    message(STATUS "fuzz targets: no clang++ found; skipped (scripts/deps.sh installs it)")
    return()
  endif()
  execute_process(COMMAND ${TRIBUTARY_CLANGXX} -print-file-name=libclang_rt.fuzzer-x86_64.a
                  OUTPUT_VARIABLE runtime OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT EXISTS "${runtime}")
    message(STATUS "fuzz targets: ${TRIBUTARY_CLANGXX} has no libFuzzer runtime; skipped")
    return()
  endif()
  include(ExternalProject)
  set(dir ${PROJECT_BINARY_DIR}/fuzz)
  ExternalProject_Add(tributary_fuzz
    SOURCE_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz
    BINARY_DIR ${dir}
    CMAKE_ARGS -G Ninja -DCMAKE_CXX_COMPILER=${TRIBUTARY_CLANGXX}
               -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
               -DTRIBUTARY_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    BUILD_COMMAND ${CMAKE_COMMAND} --build ${dir} -j 2
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    USES_TERMINAL_BUILD ON)
  foreach(name IN LISTS TRIBUTARY_FUZZERS)
    set(scratch ${dir}/smoke/${name})
    add_test(NAME fuzz_${name}
      COMMAND sh -c "rm -rf '${scratch}' && mkdir -p '${scratch}' && exec '${dir}/${name}_fuzzer' \
-max_total_time=${TRIBUTARY_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
'${scratch}' '${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${name}'")
    set_tests_properties(fuzz_${name} PROPERTIES LABELS "unit;fuzz" TIMEOUT 120)
  endforeach()
endfunction()
