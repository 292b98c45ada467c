# Registers one ctest test per GoogleTest suite of a binary (not one per test case), run at
# build time like CMake's GoogleTestAddTests.cmake:
#
#   cmake -D TEST_EXECUTABLE=... -D CTEST_FILE=... -D TEST_PREFIX=... -D TEST_FILTER=...
#         -D TEST_PROPERTIES=... -D TEST_WORKING_DIR=... -P gtest_suites.cmake
#
# Each ctest test runs exactly the cases of its suite that TEST_FILTER selects, in one
# process, so a suite's SetUpTestSuite (a daemon, its warm pool, a witness session) is paid
# once per suite instead of once per case.
cmake_minimum_required(VERSION 3.16)

if(NOT EXISTS "${TEST_EXECUTABLE}")
  message(FATAL_ERROR "gtest_suites: ${TEST_EXECUTABLE} does not exist")
endif()
set(filter)
if(TEST_FILTER)
  set(filter "--gtest_filter=${TEST_FILTER}")
endif()
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests ${filter}
  WORKING_DIRECTORY "${TEST_WORKING_DIR}" TIMEOUT 60
  OUTPUT_VARIABLE output RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "gtest_suites: ${TEST_EXECUTABLE} --gtest_list_tests failed (${result}):\n${output}")
endif()

# A name of the listing is letters, digits, '_' and '/' (parameterized suites and cases);
# anything else (a "# GetParam() = ..." comment) is cut off.
string(REPLACE "\n" ";" lines "${output}")
set(suites)
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    set("cases_${suite}")
  elseif(line MATCHES "^  ([A-Za-z0-9_/]+)")
    list(APPEND "cases_${suite}" "${suite}.${CMAKE_MATCH_1}")
  endif()
endforeach()

function(quote out value)  # a bracket argument: nothing in it is expanded
  set(${out} "[==[${value}]==]" PARENT_SCOPE)
endfunction()

set(script "")
quote(exe "${TEST_EXECUTABLE}")
quote(dir "${TEST_WORKING_DIR}")
set(props "")
foreach(p IN LISTS TEST_PROPERTIES)
  quote(q "${p}")
  string(APPEND props " ${q}")
endforeach()
foreach(suite IN LISTS suites)
  list(JOIN "cases_${suite}" ":" cases)
  quote(name "${TEST_PREFIX}${suite}")
  quote(f "--gtest_filter=${cases}")
  string(APPEND script "add_test(${name} ${exe} ${f})\n")
  string(APPEND script "set_tests_properties(${name} PROPERTIES WORKING_DIRECTORY ${dir}${props})\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
