# Compiles snippets that must NOT compile and checks that the compiler's message names the
# problem; also compiles one that must compile (so a broken include path cannot pass).
#   cmake -DCXX=<compiler> -DINCLUDE=<tilepipe include dir> -DWORK=<scratch dir> -P check_compile_fail.cmake
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY ${WORK})

function(try_snippet name code expect_success pattern)
  set(src ${WORK}/${name}.cpp)
  file(WRITE ${src} "#include <tilepipe/core/register_budget.cuh>\n${code}\nint main() {}\n")
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${src}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_success)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${name}: should compile but failed:\n${err}")
    endif()
    return()
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${name}: compiled, but the register budget check should have rejected it")
  endif()
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${name}: failed to compile without the expected message '${pattern}':\n${err}")
  endif()
  message(STATUS "${name}: rejected as expected ('${pattern}')")
endfunction()

try_snippet(good_split "static_assert(tilepipe::register_budget<40, 232, 232>::ok);" TRUE "")
try_snippet(over_budget "static_assert(tilepipe::register_budget<40, 240, 240>::ok);" FALSE
            "register budget: 128 threads x the sum of the warpgroups' register counts exceeds the 65536")
try_snippet(not_multiple_of_8 "static_assert(tilepipe::register_budget<40, 236, 232>::ok);" FALSE
            "register budget: the register count of warpgroup Warpgroup \\(setmaxnreg\\) must be a multiple of 8")
try_snippet(out_of_range "static_assert(tilepipe::register_budget<16, 240, 240>::ok);" FALSE
            "register budget: the register count of warpgroup Warpgroup must be in 24..256")
