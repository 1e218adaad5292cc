# boost_discover_tests(target [LABELS l...]): after each build, list the binary's test cases and
# register one ctest test per case, so ctest counts cases rather than binaries.
set(_BTD_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/BoostTestDiscoverScript.cmake")
function(boost_discover_tests target)
  cmake_parse_arguments(B "" "" "LABELS" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_boost_tests.cmake")
  string(REPLACE ";" "," labels "${B_LABELS}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -DEXE=$<TARGET_FILE:${target}> -DOUT=${out} -DPREFIX=${target}
            "-DLABELS=${labels}" -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR} -P "${_BTD_SCRIPT}"
    VERBATIM)
  # Until the binary is built, a placeholder test fails and says so, rather than ctest
  # silently running fewer tests (or failing to read a missing include file).
  if(NOT EXISTS "${out}")
    file(WRITE "${out}" "add_test([=[${target}:NOT_BUILT]=] \"${CMAKE_COMMAND}\" -E false)\n")
  endif()
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${out}")
endfunction()
