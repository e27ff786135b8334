# Configure-time checks of the targets that use tilepipe in a consuming project. Included by
# tilepipe-config.cmake (find_package) and by tilepipe's CMakeLists.txt when it is not the
# top-level project (add_subdirectory). When the directory that found tilepipe (find_package) or
# the top-level directory (add_subdirectory) has been processed, every target in it and below it
# that links tilepipe::tilepipe, directly or through the usage requirements of another target,
# is checked:
#   - CUDA sources (.cu, or LANGUAGE CUDA) in a directory without the CUDA language: error.
#     CMake would not compile them at all and fail later with an unrelated message;
#   - CUDA sources built for an architecture other than 90a (90a-real, 90a-virtual and OFF, where
#     the project passes its own -gencode flags, are accepted): error. wgmma and setmaxnreg exist
#     on no other target, and core/config.cuh stops every other device pass with #error, so
#     such a build cannot succeed; saying so now saves a long build and names the setting;
#   - no CUDA sources: a status line. Kernels compiled by the C++ compiler run in the CPU
#     interpreter, which is a supported way to use tilepipe (tests, machines without a GPU).
# Errors use SEND_ERROR: every offending target is listed, and nothing is generated.
include_guard(GLOBAL)

# Sets <out> to TRUE when <target> links <tilepipe_target>, directly or through
# INTERFACE_LINK_LIBRARIES of the targets it links.
function(_tilepipe_links_tilepipe target tilepipe_target out)
  get_target_property(pending ${target} LINK_LIBRARIES)
  if(pending MATCHES "NOTFOUND$")
    set(pending "")
  endif()
  set(seen "")
  while(NOT pending STREQUAL "")
    list(POP_FRONT pending lib)
    if(NOT TARGET "${lib}" OR lib IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${lib}")
    get_target_property(aliased "${lib}" ALIASED_TARGET)
    if(lib STREQUAL "${tilepipe_target}" OR aliased STREQUAL "${tilepipe_target}")
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
    get_target_property(more "${lib}" INTERFACE_LINK_LIBRARIES)
    if(NOT more MATCHES "NOTFOUND$")
      list(APPEND pending ${more})
    endif()
  endwhile()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

# Checks one target that uses tilepipe (see the top of this file).
function(_tilepipe_check_target target)
  get_target_property(sources ${target} SOURCES)
  set(cuda_sources "")
  foreach(src IN LISTS sources)
    if(src MATCHES "^\\$<")  # generator expressions, e.g. $<TARGET_OBJECTS:...>
      continue()
    endif()
    get_source_file_property(language "${src}" TARGET_DIRECTORY ${target} LANGUAGE)
    get_filename_component(extension "${src}" LAST_EXT)
    if(language STREQUAL "CUDA" OR (NOT language AND extension STREQUAL ".cu"))
      list(APPEND cuda_sources "${src}")
    endif()
  endforeach()
  if(NOT cuda_sources)
    message(STATUS "tilepipe: target ${target} has no CUDA sources: its kernels compile with the C++ "
                   "compiler and run in the CPU interpreter")
    return()
  endif()
  list(JOIN cuda_sources ", " source_names)
  get_target_property(directory ${target} SOURCE_DIR)
  get_directory_property(cuda_enabled DIRECTORY "${directory}" DEFINITION CMAKE_CUDA_COMPILER_LOADED)
  if(NOT cuda_enabled)
    message(SEND_ERROR
      "tilepipe: target ${target} has CUDA sources (${source_names}) but the CUDA language is not "
      "enabled in its directory, so nothing would compile them for the GPU. Enable it with "
      "project(<name> LANGUAGES CXX CUDA) and select sm_90a with set(CMAKE_CUDA_ARCHITECTURES 90a) "
      "before project() (see tilepipe's README). To run the kernels only in the CPU interpreter, "
      "compile them with the C++ compiler instead: "
      "set_source_files_properties(${source_names} PROPERTIES LANGUAGE CXX).")
    return()
  endif()
  get_target_property(architectures ${target} CUDA_ARCHITECTURES)
  if(architectures MATCHES "NOTFOUND$")
    set(architectures "")
  endif()
  set(other_architectures ${architectures})
  list(FILTER other_architectures EXCLUDE REGEX "^90a(-real|-virtual)?$")
  # OFF (a false constant) is accepted: the project passes its own -gencode flags then.
  if(architectures STREQUAL "" OR (architectures AND other_architectures))
    message(SEND_ERROR
      "tilepipe: target ${target} compiles CUDA sources (${source_names}) for CUDA_ARCHITECTURES "
      "\"${architectures}\", but tilepipe's device code needs sm_90a and only sm_90a (wgmma and "
      "setmaxnreg exist on no other target; tilepipe/core/config.cuh stops any other device pass). "
      "Select it with set(CMAKE_CUDA_ARCHITECTURES 90a) before project(), or "
      "set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES 90a).")
  endif()
endfunction()

# Checks the targets of <top> and the directories below it, except tilepipe's own (add_subdirectory);
# each target once, however many directories found tilepipe.
function(_tilepipe_check_consumers top)
  set(tilepipe_target tilepipe::tilepipe)  # imported (find_package)
  set(tilepipe_directory "")
  get_target_property(aliased tilepipe::tilepipe ALIASED_TARGET)
  if(aliased)  # an alias of tilepipe's own target (add_subdirectory)
    set(tilepipe_target ${aliased})
    get_target_property(tilepipe_directory ${aliased} SOURCE_DIR)
  endif()
  get_property(checked GLOBAL PROPERTY _tilepipe_checked_targets)
  set(directories "${top}")
  while(NOT directories STREQUAL "")
    list(POP_FRONT directories directory)
    if(directory STREQUAL "${tilepipe_directory}")
      continue()
    endif()
    get_directory_property(subdirectories DIRECTORY "${directory}" SUBDIRECTORIES)
    list(APPEND directories ${subdirectories})
    get_directory_property(targets DIRECTORY "${directory}" BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
        _tilepipe_links_tilepipe(${target} ${tilepipe_target} uses_tilepipe)
        if(uses_tilepipe AND NOT target IN_LIST checked)
          list(APPEND checked ${target})
          _tilepipe_check_target(${target})
        endif()
      endif()
    endforeach()
  endwhile()
  set_property(GLOBAL PROPERTY _tilepipe_checked_targets ${checked})
endfunction()

# Checks the targets of <directory> and below when its processing ends (all its targets exist then).
function(_tilepipe_defer_consumer_checks directory)
  get_property(deferred DIRECTORY "${directory}" PROPERTY _tilepipe_checks_deferred)
  if(NOT deferred)
    set_property(DIRECTORY "${directory}" PROPERTY _tilepipe_checks_deferred TRUE)
    # The arguments of a deferred call are evaluated when it runs: pass the path, not the variable.
    cmake_language(EVAL CODE
      "cmake_language(DEFER DIRECTORY [[${directory}]] CALL _tilepipe_check_consumers [[${directory}]])")
  endif()
endfunction()
