# Warnings for the project's own targets; never -march=native (builds ship to other machines).
add_library(tributary_warnings INTERFACE)
target_compile_options(tributary_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-maybe-uninitialized>)
