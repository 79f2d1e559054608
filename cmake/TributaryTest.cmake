# tributary_add_test(NAME name SOURCES ... LIBS ... LABELS ... [TIMEOUT s] [ARGS ...])
# One ctest entry per GoogleTest binary, labelled, with a timeout so nothing hangs CI.
# Sanitizer builds run several times slower: their presets scale every timeout.
set(TRIBUTARY_TEST_TIMEOUT_SCALE 1 CACHE STRING "multiplies every test's timeout (sanitizer presets)")
function(tributary_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${TRIBUTARY_TEST_TIMEOUT_SCALE}")
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main tributary_warnings)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  # A GoogleTest skip (no GPU, no privilege) shows as "Skipped" in ctest, never as passed.
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()
