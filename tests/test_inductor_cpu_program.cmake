# Issue 31 on the CPU, without Inductor: the C++ programs translated from Inductor's recorded CPU output code
# (tests/fixtures/inductor_cpu, captured with torch 2.6) compile on our CPU device and compute what the module
# computes. Each is translated by src/pytorch/ke_inductor/cpu.py, then `kernelevolve check MODEL.py --language cpp
# --seed-kernel` verifies it against the PyTorch reference (torch 1.13 will do: only the reference runs there).
# A softmax whose division is turned into a product must fail the same check, so the check is not a formality;
# a layer norm is checked with FP_REASSOCIATE 1 too (its tunable). Without a Python whose torch imports: skipped.
#   cmake -DCLI=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_inductor_cpu_program.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/find_torch_python.cmake)
if(NOT python)
  message(STATUS "SKIPPED: no Python here imports torch (set KE_PYTHON to one): the module is the reference")
  return()
endif()

# Writes the translation of fixture NAME (problem.mode) to ${WORK_DIR}/${out}.cpp; `edit` (Python, over `s`) changes
# the source first.
function(translate fixture out edit)
  string(REGEX REPLACE "\\..*" "" problem "${fixture}")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${SOURCE_DIR}/src/pytorch ${python} -c
            "import json, sys\nfrom ke_inductor import translate_cpu\ncode = open(sys.argv[1]).read()\nspec = json.load(open(sys.argv[2]))\ns = translate_cpu(code, spec)['source']\n${edit}\nopen(sys.argv[3], 'w').write(s)"
            ${SOURCE_DIR}/tests/fixtures/inductor_cpu/${fixture}.py ${SOURCE_DIR}/tests/fixtures/inductor/specs/${problem}.json
            ${WORK_DIR}/${out}.cpp
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${fixture}: the translation failed:\n${err}")
  endif()
endfunction()

# Checks ${WORK_DIR}/${out}.cpp as the seed of problem's module; sets `seed_status` in the caller to the seed's line.
function(check problem out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KE_PYTHON=${python} ${CLI} check
                          ${SOURCE_DIR}/problems/pytorch/${problem}/model.py --language cpp --seed-kernel ${WORK_DIR}/${out}.cpp
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  string(REGEX MATCH "seed: [^\n]*" line "${stdout}")
  if(line STREQUAL "")
    message(FATAL_ERROR "${out}: check printed no seed status (${rc}):\n${stdout}\n${stderr}")
  endif()
  set(seed_status "${line}" PARENT_SCOPE)
  set(check_output "${stdout}\n${stderr}" PARENT_SCOPE)
endfunction()

foreach(fixture gelu_tanh.dynamic softmax_last_dim.dynamic mean_middle_dim.dynamic relu_nchw.static
                layer_norm_affine.static)
  string(REGEX REPLACE "\\..*" "" problem "${fixture}")
  translate(${fixture} ${fixture} "")
  check(${problem} ${fixture})
  if(NOT seed_status STREQUAL "seed: ok")
    message(FATAL_ERROR "${fixture}: the translated program is not correct on the CPU (${seed_status}):\n${check_output}")
  endif()
  message(STATUS "${fixture}: translated, compiled and verified on the CPU")
endforeach()

# The tunable's other value: the reductions reassociated (and vectorized), still within the tolerance.
translate(layer_norm_affine.static layer_norm_reassociated "s = s.replace('*/\\n', '*/\\n#define FP_REASSOCIATE 1\\n', 1)")
check(layer_norm_affine layer_norm_reassociated)
if(NOT seed_status STREQUAL "seed: ok")
  message(FATAL_ERROR "layer_norm_affine with FP_REASSOCIATE 1 is not correct (${seed_status}):\n${check_output}")
endif()

# A wrong program fails: softmax's normalisation turned into a product.
translate(softmax_last_dim.dynamic softmax_wrong "assert 'tmp0 / tmp1' in s\ns = s.replace('tmp0 / tmp1', 'tmp0 * tmp1')")
check(softmax_last_dim softmax_wrong)
if(NOT seed_status MATCHES "^seed: incorrect")
  message(FATAL_ERROR "a wrong softmax passed the check (${seed_status}):\n${check_output}")
endif()
message(STATUS "a wrong translation fails the same check (${seed_status})")
