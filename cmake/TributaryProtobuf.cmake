# tributary_protobuf(<target> <file.proto> <PUBLIC|PRIVATE>)
# Generates C++ from a .proto of the calling folder into <build>/generated/<folder>/ (so it
# is included as "<folder>/<name>.pb.h") and compiles it into <target>, without the
# project's warnings (generated code is not ours to fix). PUBLIC when the target's headers
# include the generated header.
find_package(Protobuf REQUIRED)

function(tributary_protobuf target proto visibility)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${proto})
  string(REGEX REPLACE "\\.proto$" "" stem ${rel})
  set(out ${PROJECT_BINARY_DIR}/generated)
  add_custom_command(
    OUTPUT ${out}/${stem}.pb.cc ${out}/${stem}.pb.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
    COMMAND protobuf::protoc --cpp_out=${out} -I ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/${rel}
    DEPENDS ${PROJECT_SOURCE_DIR}/${rel} protobuf::protoc
    COMMENT "protoc ${rel}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out}/${stem}.pb.cc)
  set_source_files_properties(${out}/${stem}.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
  target_include_directories(${target} ${visibility} ${out})
  target_link_libraries(${target} ${visibility} protobuf::libprotobuf)
endfunction()
