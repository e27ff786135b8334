# The backend rule (docs/design.md, "One source, two passes"): only include/tilepipe/backend/
# and include/tilepipe/core/config.cuh tell nvcc's device pass from the host pass. Fails
# naming every other source file under include/, examples/, tests/ or bench/ that mentions
# the pass macros. A planted file checks first that the scan finds what it looks for.
#   cmake -DROOT=<tilepipe source dir> -DWORK=<scratch dir> -P check_backend_ifs.cmake
cmake_minimum_required(VERSION 3.25)

# Source files under `root` that mention a pass macro outside the places allowed to.
function(files_knowing_the_pass root out)
  set(found "")
  foreach(dir IN ITEMS include examples tests bench)
    file(GLOB_RECURSE files LIST_DIRECTORIES false "${root}/${dir}/*.cu" "${root}/${dir}/*.cuh" "${root}/${dir}/*.hpp"
         "${root}/${dir}/*.cpp" "${root}/${dir}/*.h")
    foreach(f IN LISTS files)
      file(RELATIVE_PATH rel "${root}" "${f}")
      if(rel MATCHES "^include/tilepipe/backend/" OR rel STREQUAL "include/tilepipe/core/config.cuh")
        continue()
      endif()
      file(STRINGS "${f}" hits REGEX "TP_DEVICE_PASS|__CUDA_ARCH__")
      if(hits)
        list(APPEND found "${rel}")
      endif()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

set(planted "${WORK}/planted")
file(REMOVE_RECURSE "${planted}")
file(WRITE "${planted}/include/tilepipe/ops/knows.cuh" "#if TP_DEVICE_PASS\n#endif\n")
file(WRITE "${planted}/examples/knows.cu" "#ifdef __CUDA_ARCH__\n#endif\n")
file(WRITE "${planted}/include/tilepipe/backend/allowed.cuh" "#if TP_DEVICE_PASS\n#endif\n")
file(WRITE "${planted}/include/tilepipe/core/config.cuh" "#if defined(__CUDA_ARCH__)\n#endif\n")
files_knowing_the_pass("${planted}" found)
list(SORT found)
if(NOT found STREQUAL "examples/knows.cu;include/tilepipe/ops/knows.cuh")
  message(FATAL_ERROR "the scan is broken: in the planted tree it found '${found}'")
endif()

files_knowing_the_pass("${ROOT}" found)
if(found)
  list(JOIN found "\n  " list)
  message(FATAL_ERROR "these files tell the device pass from the host pass (TP_DEVICE_PASS / __CUDA_ARCH__); only "
                      "include/tilepipe/backend/ and core/config.cuh may: put the difference behind a primitive "
                      "(backend/primitives.cuh)\n  ${list}")
endif()
message(STATUS "no file outside backend/ and core/config.cuh tells the passes apart")
