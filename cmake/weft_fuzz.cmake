# What the libFuzzer projects (tests/http/fuzz, tests/net/fuzz) share. Each is a project of its
# own, configured with clang++ (libFuzzer comes with clang: Debian's clang-14 and
# libclang-rt-14-dev), that compiles a few of the library's sources, which need nothing but the
# standard library (and nettle for net), with coverage instrumentation and ASan+UBSan. Each is
# also included by tests/CMakeLists.txt when the main build's compiler is clang.
#
#   weft_fuzz_project(WHAT): C++20 and the clang check, after the file's own project() (CMake
#     wants that call literally in the file); WHAT names the fuzzer in the error for another
#     compiler.
#   weft_fuzz_target(TARGET SOURCE...): one fuzzer from its sources, paths under the repository
#     root (src/http/message.cpp), the target's own file first.
get_filename_component(weft_root ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)

macro(weft_fuzz_project what)
  set(CMAKE_CXX_STANDARD 20)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "${what} needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++, not ${CMAKE_CXX_COMPILER_ID}")
  endif()
endmacro()

function(weft_fuzz_target target)
  list(TRANSFORM ARGN PREPEND ${weft_root}/)
  add_executable(${target} ${ARGN})
  target_include_directories(${target} PRIVATE ${weft_root}/include ${weft_root}/src)
  target_compile_options(${target} PRIVATE -g -O1 -fno-omit-frame-pointer
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer,address,undefined)
endfunction()
