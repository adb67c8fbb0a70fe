# Issue 29 on the CPU, from real runs: makes the databases of two short CPU runs with the command-line tool (the
# column-sum spec, and the linear_relu PyTorch problem), then calls their best programs from C
# (test_program_c) and as PyTorch operators (tests/python/test_torch_operator.py, with the module that
# `kernelevolve export --format torch` writes). The Python half needs a Python that imports torch, and an
# uninstrumented interpreter cannot load a library built with ASan: it is skipped, and says so, without.
#   cmake -DCLI=... -DPROGRAM_C=... -DSOURCE_DIR=... -DPYTHON_DIR=build/python -DWORK_DIR=... -DSANITIZE=ON|OFF
#         -P test_program_use.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

set(colsum_db ${WORK_DIR}/colsum.db)
set(linear_db ${WORK_DIR}/linear_relu.db)
run("the column-sum run" ${CLI} run ${SOURCE_DIR}/tests/fixtures/e2e/colsum.json --device cpu --db ${colsum_db}
    --max-evals 3 --seed 7)
run("calling it from C" ${PROGRAM_C} ${colsum_db})

# The Python half: a Python that imports torch, as the PyTorch bridge finds one.
set(python)
foreach(candidate $ENV{KE_PYTHON} python3 /usr/bin/python3)
  execute_process(COMMAND ${candidate} -c "import torch" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(python ${candidate})
    break()
  endif()
endforeach()
if(SANITIZE)
  message(STATUS "SKIPPED: the Python operator tests (an uninstrumented Python cannot load a library built with ASan)")
  return()
endif()
if(NOT python)
  message(STATUS "SKIPPED: the Python operator tests (no Python here imports torch)")
  return()
endif()
run("the linear_relu run" ${CLI} run ${SOURCE_DIR}/problems/pytorch/linear_relu/cpu.json --device cpu --db ${linear_db}
    --max-evals 3 --seed 7)
run("kernelevolve export --format torch" ${CLI} export ${linear_db} --format torch -o ${WORK_DIR}/linear_relu_op.py)
set(ENV{PYTHONPATH} ${PYTHON_DIR})
set(ENV{KE_TEST_LINEAR_DB} ${linear_db})
set(ENV{KE_TEST_LINEAR_MODEL} ${SOURCE_DIR}/problems/pytorch/linear_relu/model.py)
set(ENV{KE_TEST_COLSUM_DB} ${colsum_db})
set(ENV{KE_TEST_EXPORTED} ${WORK_DIR}/linear_relu_op.py)
run("the PyTorch operator tests" ${python} ${SOURCE_DIR}/tests/python/test_torch_operator.py -v)
