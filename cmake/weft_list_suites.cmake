# cmake -D WEFT_TEST_EXE=... -D WEFT_TEST_LIST=... [-D WEFT_TEST_FILTER_PATTERN=...] -P this:
# writes the names of the GoogleTest suites of WEFT_TEST_EXE (those with a test that the
# --gtest_filter pattern WEFT_TEST_FILTER_PATTERN matches, when given), one per line, to
# WEFT_TEST_LIST. weft_suite_tests.cmake runs it after every link of a test binary.
set(arguments --gtest_list_tests)
if(WEFT_TEST_FILTER_PATTERN)
  list(APPEND arguments "--gtest_filter=${WEFT_TEST_FILTER_PATTERN}")
endif()
execute_process(COMMAND ${WEFT_TEST_EXE} ${arguments}
  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${WEFT_TEST_EXE} --gtest_list_tests failed (${status}):\n${errors}")
endif()
# A suite is a line that does not start with a space and ends its name with a dot
# ("Channel.", "Procs/GlobalQueueRace.  # TypeParam = ..."); its tests follow, indented.
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.( |$)")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)
if(NOT suites)
  message(FATAL_ERROR "${WEFT_TEST_EXE} lists no test suite:\n${listing}")
endif()
list(JOIN suites "\n" content)
file(WRITE ${WEFT_TEST_LIST} "${content}\n")
