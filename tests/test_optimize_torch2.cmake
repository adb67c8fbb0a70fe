# `kernelevolve optimize` under PyTorch 2.x (tests/python/test_optimize_torch2.py): the torch.export capture, the
# torch.compile baseline, the operators as custom ops, torch.compile and torch.export of the optimized model. It needs
# a Python whose torch is 2.x, as the optimizer finds one ($KE_PYTHON first; Debian 12's is 1.13: there it is skipped,
# saying why; scripts/torch2-chroot.sh gives a 2.6 on the CPU).
#   cmake -DCLI=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_optimize_torch2.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ke_torch_check "int(torch.__version__.split('.')[0]) >= 2")
include(${CMAKE_CURRENT_LIST_DIR}/find_torch_python.cmake)
if(NOT python)
  message(STATUS "SKIPPED: no Python here imports a torch 2.x (torch.export, torch.compile); set KE_PYTHON to one, "
                 "or run it in scripts/torch2-chroot.sh")
  return()
endif()
get_filename_component(build_dir ${CLI} DIRECTORY)
set(sanitize OFF)
if(EXISTS ${build_dir}/CMakeCache.txt)
  file(STRINGS ${build_dir}/CMakeCache.txt line REGEX "^KE_SANITIZE:[A-Z]+=")
  if(line MATCHES "=(ON|1|TRUE|YES)$")
    set(sanitize ON)
  endif()
endif()
set(ENV{KE_CLI} ${CLI})
set(ENV{KE_WORK} ${WORK_DIR})
set(ENV{KE_SANITIZE} ${sanitize})
execute_process(COMMAND ${python} ${SOURCE_DIR}/tests/python/test_optimize_torch2.py RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the optimizer's PyTorch 2.x tests failed (${rc})")
endif()
