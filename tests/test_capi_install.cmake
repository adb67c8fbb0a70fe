# Installs this build into a prefix inside the build tree, builds the separate consumer project
# (tests/consumer) against it with find_package(KernelEvolve), runs its C and C++ programs, then builds
# the C program again with nothing but pkg-config and the C compiler.
#   cmake -DBUILD_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=... -DGENERATOR=... -DSPEC=... -P test_capi_install.cmake
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{KE_WORKER} "")  # the installed library must find the installed worker by itself

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(expected include/kernelevolve.h include/kernelevolve/kernelevolve.hpp bin/kernelevolve
  share/doc/kernelevolve/docs/spec-format.md share/doc/kernelevolve/README.md)
# Every page of the source tree's docs/, in docs/ beside the README as in the source tree (its links resolve).
file(GLOB doc_pages ${CONSUMER_DIR}/../../docs/*.md)
if(NOT doc_pages)
  message(FATAL_ERROR "no docs/*.md found beside ${CONSUMER_DIR}/../..")
endif()
foreach(page IN LISTS doc_pages)
  get_filename_component(name ${page} NAME)
  list(APPEND expected share/doc/kernelevolve/docs/${name})
endforeach()
if(EXISTS ${CONSUMER_DIR}/../../knowledge)
  list(APPEND expected share/kernelevolve/knowledge/README.md)
endif()
foreach(f IN LISTS expected)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
file(GLOB_RECURSE workers ${prefix}/*/kernelevolve-worker)
file(GLOB_RECURSE configs ${prefix}/*/KernelEvolveConfig.cmake)
file(GLOB_RECURSE pcs ${prefix}/*/kernelevolve.pc)
if(NOT workers OR NOT configs OR NOT pcs)
  message(FATAL_ERROR "the install lacks the worker (${workers}), the package config (${configs}) or the "
                      "pkg-config file (${pcs})")
endif()

# The Python package, beside the library it names: importable from the prefix, loading that library.
file(GLOB_RECURSE py_library ${prefix}/_library.py)
if(NOT py_library)
  message(FATAL_ERROR "the install has no Python package kernelevolve (kernelevolve/_library.py)")
endif()
get_filename_component(py_dir ${py_library} DIRECTORY)
get_filename_component(py_dir ${py_dir} DIRECTORY)
find_program(PYTHON3 python3)
if(PYTHON3 AND NOT SANITIZE)
  set(ENV{PYTHONPATH} ${py_dir})
  run("importing the installed Python package" ${PYTHON3} -c
      "import kernelevolve, sys; p = kernelevolve.library_path(); print(p); sys.exit(not p.startswith('${prefix}/'))")
endif()

# Under KE_SANITIZE the installed libraries need the sanitizer runtime in the programs that load them.
set(sanitize_flags)
if(SANITIZE)
  set(sanitize_flags -fsanitize=address,undefined)
endif()
run("configuring the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS=${sanitize_flags}"
    "-DCMAKE_CXX_FLAGS=${sanitize_flags}")
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("the C consumer" ${WORK_DIR}/build/consumer_c ${SPEC})
run("the C++ consumer" ${WORK_DIR}/build/consumer_cxx ${SPEC})
run("the installed command-line tool" ${prefix}/bin/kernelevolve check ${SPEC})

# pkg-config alone, as a Makefile or a Rust/Go build would use it.
find_program(PKG_CONFIG pkg-config)
find_program(CC NAMES cc gcc clang)
if(PKG_CONFIG AND CC)
  get_filename_component(pc_dir ${pcs} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs kernelevolve OUTPUT_VARIABLE flags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  execute_process(COMMAND ${PKG_CONFIG} --variable=libdir kernelevolve OUTPUT_VARIABLE libdir
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR NOT flags MATCHES "-lkernelevolve")
    message(FATAL_ERROR "pkg-config kernelevolve: '${flags}'")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("cc with pkg-config" ${CC} -std=c99 -Wall -Wextra -pedantic -Werror ${CONSUMER_DIR}/consumer.c ${flags}
      ${sanitize_flags} -Wl,-rpath,${libdir} -o ${WORK_DIR}/consumer_pc)
  run("the pkg-config consumer" ${WORK_DIR}/consumer_pc ${SPEC})
else()
  message(STATUS "no pkg-config or C compiler: the pkg-config build is not tried")
endif()
