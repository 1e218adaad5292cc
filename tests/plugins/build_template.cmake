# ctest -P script: installs the policy SDK of the build tree into a fresh prefix and builds
# examples/plugin_template against it, as a plugin author outside the tree would.
#   -DBUILD_DIR=<troupe build> -DSOURCE_DIR=<troupe source> -DWORK_DIR=<scratch> -DGENERATOR=<gen>
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
endfunction()
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix" --component policy_sdk)
if(NOT EXISTS "${WORK_DIR}/prefix/include/troupe/troupe_sched_policy.h")
  message(FATAL_ERROR "cmake --install did not put include/troupe/troupe_sched_policy.h in ${WORK_DIR}/prefix")
endif()
# Only the SDK: the template must not see Troupe's source tree.
run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/plugin_template" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCMAKE_BUILD_TYPE=Release)
run("${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
if(NOT EXISTS "${WORK_DIR}/build/troupe_policy_deadline_first.so")
  message(FATAL_ERROR "the template built no ${WORK_DIR}/build/troupe_policy_deadline_first.so")
endif()
execute_process(COMMAND nm -D --defined-only "${WORK_DIR}/build/troupe_policy_deadline_first.so"
                OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(rc EQUAL 0 AND NOT syms MATCHES "troupe_policy_entry")
  message(FATAL_ERROR "the template plugin does not export troupe_policy_entry:\n${syms}")
endif()
message(STATUS "template plugin built: ${WORK_DIR}/build/troupe_policy_deadline_first.so")
