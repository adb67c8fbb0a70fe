# Builds and runs the Rust or Go embedding example against the C library of this build tree, offline,
# with every cache and output inside WORK_DIR. Without the toolchain it prints "SKIPPED: ..." and ctest
# reports the test as skipped.
#   cmake -DLANG=rust|go -DCARGO=... -DGO=... -DSOURCE_DIR=... -DWORK_DIR=... -DLIBRARY_DIR=... -DSPEC=...
#         -P test_capi_examples.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
if(SANITIZE)
  # An uninstrumented cargo or go binary cannot load a library built with AddressSanitizer.
  message("SKIPPED: the ${LANG} example does not run against a sanitizer build (KE_SANITIZE)")
  return()
endif()
set(ENV{KE_WORKER} "")  # the library must find its worker beside itself, as in a user's program

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

if(LANG STREQUAL "rust")
  if(NOT CARGO)
    message("SKIPPED: cargo not found (on Debian: apt-get install cargo, as scripts/install-deps.sh does)")
    return()
  endif()
  set(ENV{CARGO_HOME} ${WORK_DIR}/cargo-home)
  set(ENV{CARGO_TARGET_DIR} ${WORK_DIR}/target)
  set(ENV{CARGO_NET_OFFLINE} true)
  set(ENV{KERNELEVOLVE_LIB_DIR} ${LIBRARY_DIR})
  run("cargo build" ${CARGO} build --offline --locked --manifest-path ${SOURCE_DIR}/examples/rust/Cargo.toml)
  run("the Rust example" ${WORK_DIR}/target/debug/evolve_rust ${SPEC} 8)
elseif(LANG STREQUAL "go")
  if(NOT GO)
    message("SKIPPED: go not found (on Debian: apt-get install golang-go, as scripts/install-deps.sh does)")
    return()
  endif()
  set(ENV{GOPATH} ${WORK_DIR}/gopath)
  set(ENV{GOCACHE} ${WORK_DIR}/gocache)
  set(ENV{GOPROXY} off)
  set(ENV{GOFLAGS} -buildvcs=false)
  set(ENV{GOTOOLCHAIN} local)
  set(ENV{GO111MODULE} on)
  set(ENV{CGO_ENABLED} 1)
  set(ENV{CGO_CFLAGS} "-I${SOURCE_DIR}/capi")
  set(ENV{CGO_LDFLAGS} "-L${LIBRARY_DIR} -Wl,-rpath,${LIBRARY_DIR}")
  execute_process(COMMAND ${GO} build -o ${WORK_DIR}/evolve_go . WORKING_DIRECTORY ${SOURCE_DIR}/examples/go
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go build failed (${rc})")
  endif()
  run("the Go example" ${WORK_DIR}/evolve_go ${SPEC} 8)
else()
  message(FATAL_ERROR "LANG must be rust or go, not '${LANG}'")
endif()
