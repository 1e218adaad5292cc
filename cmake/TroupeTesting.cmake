# troupe_add_boost_test(NAME n SOURCES a.cpp b.cpp LIBS x y [LABELS l]) builds one Boost.Test
# binary and registers every test case with ctest (one ctest test per case).
include(BoostTestDiscover)
function(troupe_add_boost_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT TROUPE_BUILD_TESTS)
    return()
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} Boost::unit_test_framework)
  target_compile_definitions(${T_NAME} PRIVATE BOOST_TEST_DYN_LINK
    TROUPE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TROUPE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
  boost_discover_tests(${T_NAME} LABELS "${T_LABELS}")
endfunction()
