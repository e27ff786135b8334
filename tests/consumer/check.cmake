# Builds the consumer project in this directory (the CMakeLists.txt the README shows) against
# tilepipe one way, runs it in the interpreter, and checks variants of it:
#   readme       as written (CXX + CUDA, sm_90a): builds with nvcc, runs;
#   interpreter  CXX only, app.cu compiled as C++: builds with the C++ compiler, runs, and
#                configure says that the kernels run in the CPU interpreter;
#   no_cuda      CXX only, app.cu left as CUDA: configure fails naming the missing CUDA language;
#   sm_80        CMAKE_CUDA_ARCHITECTURES 80: configure fails naming the architecture.
# Without nvcc only interpreter and no_cuda run, and the output says so (CTest marks it skipped).
#   cmake -DMODE=add_subdirectory|find_package -DTILEPIPE_SOURCE_DIR=<dir> -DWORK=<scratch dir>
#         -DGENERATOR=<generator> -DMAKE_PROGRAM=<path> -DCXX_COMPILER=<path> [-DCUDA_COMPILER=<nvcc>]
#         -P check.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(ENV{TILEPIPE_BACKEND} interpret)  # the consumer's kernel runs in the interpreter even on a GPU machine

set(configure_args -G "${GENERATOR}" "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
                   -DCMAKE_BUILD_TYPE=Release)
if(CUDA_COMPILER)
  list(APPEND configure_args "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}")
endif()

# Runs a command; stops the test with its output unless it exits with 0.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args "-DTILEPIPE_SOURCE_DIR=${TILEPIPE_SOURCE_DIR}")
elseif(MODE STREQUAL "find_package")
  run("configuring tilepipe for installation" ${CMAKE_COMMAND} -S "${TILEPIPE_SOURCE_DIR}" -B "${WORK}/tilepipe"
      ${configure_args} -DTILEPIPE_BUILD_TESTS=OFF -DTILEPIPE_BUILD_EXAMPLES=OFF)
  run("installing tilepipe" ${CMAKE_COMMAND} --install "${WORK}/tilepipe" --prefix "${WORK}/prefix")
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${WORK}/prefix")
else()
  message(FATAL_ERROR "MODE must be add_subdirectory or find_package, not '${MODE}'")
endif()

file(READ "${CMAKE_CURRENT_LIST_DIR}/CMakeLists.txt" readme_lists)

# Writes variant <name> of the consumer (its CMakeLists.txt with <from> replaced by <to>) and
# configures it; sets configure_rc and configure_out (whitespace collapsed: CMake wraps messages).
function(configure_variant name from to)
  set(lists "${readme_lists}")
  if(NOT from STREQUAL "")
    string(REPLACE "${from}" "${to}" lists "${readme_lists}")
    if(lists STREQUAL readme_lists)
      message(FATAL_ERROR "variant ${name}: '${from}' is not in tests/consumer/CMakeLists.txt")
    endif()
  endif()
  file(WRITE "${WORK}/${name}/src/CMakeLists.txt" "${lists}")
  file(COPY "${CMAKE_CURRENT_LIST_DIR}/app.cu" DESTINATION "${WORK}/${name}/src")
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK}/${name}/src" -B "${WORK}/${name}/build" ${configure_args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX REPLACE "[ \t\r\n]+" " " out "${out}")
  set(configure_rc ${rc} PARENT_SCOPE)
  set(configure_out "${out}" PARENT_SCOPE)
endfunction()

# Configures variant <name>, builds it and runs the app, which checks its result.
function(build_and_run_variant name from to expected_configure_output)
  configure_variant(${name} "${from}" "${to}")
  if(NOT configure_rc EQUAL 0 OR NOT configure_out MATCHES "${expected_configure_output}")
    message(FATAL_ERROR "variant ${name}: configure exited with ${configure_rc}, expected 0 and output matching "
                        "'${expected_configure_output}':\n${configure_out}")
  endif()
  if(MODE STREQUAL "find_package")  # the package just installed, not another one
    file(STRINGS "${WORK}/${name}/build/CMakeCache.txt" found REGEX "^tilepipe_DIR:")
    string(FIND "${found}" "${WORK}/prefix/" position)
    if(position EQUAL -1)
      message(FATAL_ERROR "variant ${name}: found tilepipe elsewhere: ${found}")
    endif()
  endif()
  run("variant ${name}: build" ${CMAKE_COMMAND} --build "${WORK}/${name}/build")
  run("variant ${name}: app" "${WORK}/${name}/build/app")
  if(NOT out MATCHES "on CPU interpreter: 0 of [0-9]+ elements wrong")
    message(FATAL_ERROR "variant ${name}: unexpected output of the app:\n${out}")
  endif()
  string(STRIP "${out}" out)
  message(STATUS "${name}: built and ran: ${out}")
endfunction()

# Configures variant <name> and expects it to fail with a message matching <expected_error>.
function(expect_configure_error name from to expected_error)
  configure_variant(${name} "${from}" "${to}")
  if(configure_rc EQUAL 0 OR NOT configure_out MATCHES "${expected_error}")
    message(FATAL_ERROR "variant ${name}: configure exited with ${configure_rc}, expected an error "
                        "matching '${expected_error}':\n${configure_out}")
  endif()
  message(STATUS "${name}: configure failed as expected ('${expected_error}')")
endfunction()

build_and_run_variant(interpreter "add_executable(app app.cu)"
                      "add_executable(app app.cu)\nset_source_files_properties(app.cu PROPERTIES LANGUAGE CXX)"
                      "tilepipe: target app has no CUDA sources: its kernels compile with the C\\+\\+ compiler and run in the CPU interpreter")
expect_configure_error(no_cuda "LANGUAGES CXX CUDA" "LANGUAGES CXX"
                       "tilepipe: target app has CUDA sources \\(app.cu\\) but the CUDA language is not enabled")
if(NOT CUDA_COMPILER)
  message(STATUS "nvcc not found: the sm_90a consumer and the architecture check were not run")
  return()
endif()
build_and_run_variant(readme "" "" "Generating done")
expect_configure_error(sm_80 "set(CMAKE_CUDA_ARCHITECTURES 90a)" "set(CMAKE_CUDA_ARCHITECTURES 80)"
                       "tilepipe: target app compiles CUDA sources \\(app.cu\\) for CUDA_ARCHITECTURES \"80\", but tilepipe's device code needs sm_90a")
