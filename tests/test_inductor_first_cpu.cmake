# Issue 31 on the CPU with PyTorch 2.x: for an element-wise problem, a reduction and two normalizations of
# problems/pytorch, and two modules whose outputs torch.compile returns as views (issue 52), `kernelevolve run
# MODEL.py --device cpu` with no seed and no model captures the C++ that torch.compile (Inductor) writes, translates it (src/pytorch/ke_inductor/cpu.py), and makes it node 0: the test asserts
# that node 0 came from torch.compile and was verified, that the plan calls Inductor's kernels, that the run timed
# torch.compile on the CPU, and that a module with a matrix product is refused naming the extern call. Where this
# Python's torch has no Inductor (Debian 12's 1.13), it is skipped and says why; on a Debian 12 machine run it in
# PyTorch 2.6: scripts/torch2-chroot.sh run ctest --test-dir build -R test_inductor_first_cpu
#   cmake -DCLI=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_inductor_first_cpu.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

set(ke_torch_check "hasattr(torch, 'compile') and __import__('importlib').util.find_spec('torch._inductor') is not None")
include(${CMAKE_CURRENT_LIST_DIR}/find_torch_python.cmake)
if(NOT python)
  message(STATUS "SKIPPED: no Python here has a torch with torch.compile and Inductor (Debian 12's is 1.13; set "
                 "KE_PYTHON to one, or run it in scripts/torch2-chroot.sh)")
  return()
endif()

# problem#what its plan must hold (a regular expression over `kernelevolve best`'s source). A problem is
# problems/pytorch/NAME/model.py, or a file of tests/fixtures/inductor_strided (issue 52: outputs torch.compile
# returns as views, a transposed one and a split into three, copied into their outputs by relayout steps). No
# bracket in a pattern: a list item with an unmatched one swallows the next.
set(cases
    "gelu_tanh#void cpp_fused_gelu_0\\("
    "softmax_last_dim#void cpp_fused__softmax_0\\(.*max_propagate_nan"
    "layer_norm_affine#struct Welford.*void cpp_fused_native_layer_norm_0\\("
    "mean_middle_dim#void cpp_fused_mean_0\\("
    "inductor_strided/scale_transpose#\"ke_relayout_3d_f32\", \"args\": .\"buf0\", \"out\".*void ke_relayout_3d_f32\\("
    "inductor_strided/split_heads#\"out0\".*\"out1\".*\"out2\".*void cpp_fused_gelu_0\\(.*void ke_relayout_4d_f32\\(")
foreach(case IN LISTS cases)
  string(FIND "${case}" "#" at)
  string(SUBSTRING "${case}" 0 ${at} name)
  math(EXPR at "${at} + 1")
  string(SUBSTRING "${case}" ${at} -1 pattern)
  if(name MATCHES "/")
    set(model ${SOURCE_DIR}/tests/fixtures/${name}.py)
    get_filename_component(name ${name} NAME)
  else()
    set(model ${SOURCE_DIR}/problems/pytorch/${name}/model.py)
  endif()
  set(db ${WORK_DIR}/${name}.db)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KE_PYTHON=${python} ${CLI} run
                          ${model} --device cpu --db ${db} --max-evals 3 --seed 7
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: the run failed (${rc}):\n${out}\n${err}")
  endif()
  foreach(expect "capturing what torch.compile generates" "node 0 is torch.compile's program, translated"
                 "torch.compile: [0-9.]+ us")
    if(NOT "${out}\n${err}" MATCHES "${expect}")
      message(FATAL_ERROR "${name}: the run's output does not say '${expect}':\n${out}\n${err}")
    endif()
  endforeach()
  execute_process(COMMAND ${CLI} show ${db} --node 0 RESULT_VARIABLE rc OUTPUT_VARIABLE node0 ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT node0 MATCHES "^node 0 of run 1 [^\n]*, ok, " OR NOT node0 MATCHES "note: torch.compile's program")
    message(FATAL_ERROR "${name}: node 0 is not torch.compile's program, verified:\n${node0}\n${err}")
  endif()
  execute_process(COMMAND ${CLI} best ${db} RESULT_VARIABLE rc OUTPUT_VARIABLE source ERROR_VARIABLE err)
  string(REPLACE "\n" " " flat "${source}")
  if(NOT flat MATCHES "kernelevolve-plan" OR NOT flat MATCHES "${pattern}" OR flat MATCHES "#include \"")
    message(FATAL_ERROR "${name}: the program is not the expected plan ('${pattern}'):\n${source}\n${err}")
  endif()
  string(REGEX MATCH "torch.compile: [0-9.]+ us[^\n]*" compile_line "${out}\n${err}")
  message(STATUS "${name}: node 0 from torch.compile, verified; ${compile_line}")
endforeach()

# A matrix product: Inductor calls extern_kernels.addmm, which a CPU program has no step for. Asked for, the
# capture is refused naming it.
execute_process(COMMAND ${CMAKE_COMMAND} -E env KE_PYTHON=${python} ${CLI} run
                        ${SOURCE_DIR}/problems/pytorch/linear_relu/model.py --device cpu --first compile
                        --db ${WORK_DIR}/linear_relu.db --max-evals 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "extern_kernels.addmm")
  message(FATAL_ERROR "linear_relu: the capture is not refused naming extern_kernels.addmm (${rc}):\n${out}\n${err}")
endif()
message(STATUS "linear_relu: refused, naming extern_kernels.addmm")
