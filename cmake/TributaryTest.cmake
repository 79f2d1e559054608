# tributary_add_test(NAME name SOURCES ... LIBS ... LABELS ... [TIMEOUT s] [ARGS ...])
# One ctest entry per GoogleTest binary, labelled, with a timeout so nothing hangs CI.
function(tributary_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main tributary_warnings)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  # A GoogleTest skip (no GPU, no privilege) shows as "Skipped" in ctest, never as passed.
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()
