# Issue 29 on the CPU, from real runs: makes the databases of short CPU runs with the command-line tool (the
# column-sum spec, the linear_relu PyTorch problem, and RMSNorm's forward and backward), then calls their best
# programs from C (test_program_c), from Python on raw addresses (tests/python/test_program_call.py, any Python 3)
# and as PyTorch operators (tests/python/test_torch_operator.py, with the module
# that `kernelevolve export --format torch` writes; RMSNorm's two as one operator a model trains with). The Python half needs a Python that imports torch, and an
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

if(SANITIZE)
  message(STATUS "SKIPPED: the Python tests (an uninstrumented Python cannot load a library built with ASan)")
  return()
endif()
# kernelevolve.Program's refusals (issue 49): any Python 3, no PyTorch needed.
find_program(plain_python NAMES python3)
if(plain_python)
  set(ENV{PYTHONPATH} ${PYTHON_DIR})
  set(ENV{KE_TEST_COLSUM_DB} ${colsum_db})
  run("the Program call tests" ${plain_python} ${SOURCE_DIR}/tests/python/test_program_call.py -v)
else()
  message(STATUS "SKIPPED: the Program call tests (no python3)")
endif()

# The Python half: a Python that imports torch, as the PyTorch bridge finds one.
include(${CMAKE_CURRENT_LIST_DIR}/find_torch_python.cmake)
if(NOT python)
  message(STATUS "SKIPPED: the Python operator tests (no Python here imports torch)")
  return()
endif()
run("the linear_relu run" ${CLI} run ${SOURCE_DIR}/problems/pytorch/linear_relu/cpu.json --device cpu --db ${linear_db}
    --max-evals 3 --seed 7)
run("kernelevolve export --format torch" ${CLI} export ${linear_db} --format torch -o ${WORK_DIR}/linear_relu_op.py)
# Training (issue 32): RMSNorm's forward and its backward (--backward), two runs of one module, one operator.
set(rms_model ${WORK_DIR}/rms_norm.py)
file(COPY_FILE ${SOURCE_DIR}/problems/pytorch/rms_norm_backward/model.py ${rms_model})
run("the RMSNorm forward run" ${CLI} run ${rms_model} --device cpu --language c --db ${WORK_DIR}/rms_fwd.db
    --seed-kernel ${SOURCE_DIR}/tests/fixtures/pytorch/rms_norm_forward_seed.c --max-evals 2 --seed 7)
run("the RMSNorm backward run" ${CLI} run ${rms_model} --device cpu --language c --backward --db ${WORK_DIR}/rms_bwd.db
    --seed-kernel ${SOURCE_DIR}/problems/pytorch/rms_norm_backward/seed.c --max-evals 2 --seed 7)
set(ENV{KE_TEST_RMS_MODEL} ${rms_model})
set(ENV{KE_TEST_RMS_FWD_DB} ${WORK_DIR}/rms_fwd.db)
set(ENV{KE_TEST_RMS_BWD_DB} ${WORK_DIR}/rms_bwd.db)
set(ENV{PYTHONPATH} ${PYTHON_DIR})
set(ENV{KE_TEST_LINEAR_DB} ${linear_db})
set(ENV{KE_TEST_LINEAR_MODEL} ${SOURCE_DIR}/problems/pytorch/linear_relu/model.py)
set(ENV{KE_TEST_COLSUM_DB} ${colsum_db})
set(ENV{KE_TEST_EXPORTED} ${WORK_DIR}/linear_relu_op.py)
run("the PyTorch operator tests" ${python} ${SOURCE_DIR}/tests/python/test_torch_operator.py -v)
