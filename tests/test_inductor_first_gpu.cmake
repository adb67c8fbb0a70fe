# Issue 31 on a CUDA GPU with PyTorch 2.x: for an element-wise problem, a reduction, a matrix product with an epilogue
# (a library step and a kernel) and a normalization of problems/pytorch, `kernelevolve run MODEL.py --device cuda`
# with no seed and no model captures what torch.compile generates, translates it, and makes it node 0: the test
# asserts that node 0 came from torch.compile, was verified, that the plan has the expected steps, and that the
# search ran from it and reported torch.compile's time. How fast is for the bench (bench/inductor_first_program.sh).
# Without a GPU, or a Python whose torch has torch.compile and CUDA, it is skipped and says why.
#   cmake -DCLI=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_inductor_first_gpu.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(STATUS "SKIPPED: no NVIDIA GPU here (nvidia-smi -L fails): torch.compile's program is captured on one")
  return()
endif()
set(ke_torch_check "hasattr(torch, 'compile') and torch.cuda.is_available()")
include(${CMAKE_CURRENT_LIST_DIR}/find_torch_python.cmake)
if(NOT python)
  message(STATUS "SKIPPED: no Python here has a torch with torch.compile and CUDA (set KE_PYTHON to one)")
  return()
endif()

# problem#what its plan must hold (a regular expression over `kernelevolve best`'s source)
set(cases
    "relu_nchw#triton_poi_fused_relu"
    "mean_middle_dim#triton_(red|per)_fused_mean"
    "linear_relu#\"library\": \"cublas(lt)?\\.[a-z]+\".*triton_poi_fused"
    "layer_norm_affine#triton_(red|per)_fused_native_layer_norm")
foreach(case IN LISTS cases)
  string(FIND "${case}" "#" at)
  string(SUBSTRING "${case}" 0 ${at} name)
  math(EXPR at "${at} + 1")
  string(SUBSTRING "${case}" ${at} -1 pattern)
  set(db ${WORK_DIR}/${name}.db)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KE_PYTHON=${python} ${CLI} run
                          ${SOURCE_DIR}/problems/pytorch/${name}/model.py --device cuda --db ${db} --max-evals 3 --seed 7
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: the run failed (${rc}):\n${out}\n${err}")
  endif()
  foreach(expect "capturing what torch.compile generates" "torch.compile: [0-9.]+ us")
    if(NOT "${out}\n${err}" MATCHES "${expect}")
      message(FATAL_ERROR "${name}: the run's output does not say '${expect}':\n${out}\n${err}")
    endif()
  endforeach()
  execute_process(COMMAND ${CLI} show ${db} --node 0 RESULT_VARIABLE rc OUTPUT_VARIABLE node0 ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT node0 MATCHES "^node 0 of run 1 [^\n]*, ok, " OR NOT node0 MATCHES "note: torch.compile's program")
    message(FATAL_ERROR "${name}: node 0 is not torch.compile's program, verified:\n${node0}\n${err}")
  endif()
  # The best descends from node 0 by its tunables alone (no model here): the same plan.
  execute_process(COMMAND ${CLI} best ${db} RESULT_VARIABLE rc OUTPUT_VARIABLE source ERROR_VARIABLE err)
  string(REPLACE "\n" " " flat "${source}")
  if(NOT flat MATCHES "kernelevolve-plan" OR NOT flat MATCHES "${pattern}")
    message(FATAL_ERROR "${name}: the program is not the expected plan ('${pattern}'):\n${source}\n${err}")
  endif()
  message(STATUS "${name}: node 0 from torch.compile, verified; the plan has ${pattern}")
endforeach()
