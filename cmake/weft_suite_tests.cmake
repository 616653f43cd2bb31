# weft_suite_tests(TARGET PREFIX prefix [FILTER gtest-filter] [ENVIRONMENT env...] [LABELS l...])
#
# Registers every GoogleTest *suite* of TARGET as one ctest test, "PREFIX" "Suite", that runs
# TARGET --gtest_filter=Suite.* in a process of its own, with ENVIRONMENT and LABELS. FILTER
# (a --gtest_filter pattern) keeps only the suites it matches.
#
# Why suites and not tests (gtest_discover_tests): a process per test costs its start-up on
# every test, and under ASan+UBSan that start-up is most of the run. On 2026-12-06, 1f5eca3:
# weft_tests starts in 0.05 s in release but 0.47 s under the asan preset (2.7 million dynamic
# relocations, mostly UBSan's check descriptors, and ASan registering every global), while its
# 29 Channel tests together run in 23 ms; the 5,212 ASan tests summed 3,958 s, of which about
# 2,500 s was start-up. One process per suite keeps what the isolation was for (a crash or a
# leak ends one suite, and ctest prints that suite's whole output) at a tenth of the starts.
# A test that leaves state behind for the next one in its process is a defect this exposes.
#
# The suites are listed after every link (POST_BUILD, as gtest_discover_tests does by default)
# into TARGET's list file, which the ctest include file written here reads; a binary not yet
# built registers one test that fails saying so.
function(weft_suite_tests target)
  cmake_parse_arguments(arg "" "PREFIX;FILTER" "ENVIRONMENT;LABELS" ${ARGN})
  string(MAKE_C_IDENTIFIER "${target}_${arg_PREFIX}" stem)
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${stem}_suites.txt")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${stem}_include.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "WEFT_TEST_EXE=$<TARGET_FILE:${target}>"
            -D "WEFT_TEST_FILTER_PATTERN=${arg_FILTER}" -D "WEFT_TEST_LIST=${list_file}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/weft_list_suites.cmake
    BYPRODUCTS ${list_file}
    VERBATIM)
  # The properties, as ctest's set_tests_properties wants them: a list inside a bracket argument.
  set(properties "")
  if(arg_ENVIRONMENT)
    string(APPEND properties " ENVIRONMENT [==[${arg_ENVIRONMENT}]==]")
  endif()
  if(arg_LABELS)
    string(APPEND properties " LABELS [==[${arg_LABELS}]==]")
  endif()
  file(GENERATE OUTPUT ${include_file} CONTENT
"if(EXISTS [==[${list_file}]==])
  file(STRINGS [==[${list_file}]==] weft_suites)
  foreach(weft_suite IN LISTS weft_suites)
    add_test(\"${arg_PREFIX}\${weft_suite}\" [==[$<TARGET_FILE:${target}>]==]
             \"--gtest_filter=\${weft_suite}.*\" --gtest_brief=1)
    set_tests_properties(\"${arg_PREFIX}\${weft_suite}\" PROPERTIES${properties})
  endforeach()
else()
  add_test([==[${arg_PREFIX}NOT_BUILT]==] [==[${target}_NOT_BUILT]==])
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
