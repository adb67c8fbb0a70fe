# Included by the cmake -P test scripts that run Python with PyTorch: sets `python` to the first of $KE_PYTHON,
# python3 and /usr/bin/python3 (as the library's PyTorch bridge looks) whose torch imports and passes
# `ke_torch_check` (a Python expression; default: True), or to nothing.
set(python)
if(NOT DEFINED ke_torch_check)
  set(ke_torch_check "True")
endif()
foreach(candidate $ENV{KE_PYTHON} python3 /usr/bin/python3)
  execute_process(COMMAND ${candidate} -c "import sys, torch; sys.exit(0 if (${ke_torch_check}) else 1)"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(python ${candidate})
    break()
  endif()
endforeach()
