# What `cmake --install` puts where, and the package files that let other projects find it:
#   include/kernelevolve.h, include/kernelevolve/*.hpp     the C API and the C++ API
#   lib/libkernelevolve.so.0                                  the C API (KernelEvolve::kernelevolve)
#   lib/libkernelevolve_cxx.so.0.1                            the C++ API (KernelEvolve::kernelevolve_cxx)
#   libexec/kernelevolve/kernelevolve-worker                  where the library looks for its worker
#   libexec/kernelevolve/libkernelevolve_confine.so           the sandbox for Triton's compile helper, beside it
#   bin/kernelevolve                                          the command-line tool
#   share/kernelevolve/knowledge/                             the model mutator's knowledge base
#   share/doc/kernelevolve/README.md, docs/*.md               the README and every page of docs/ (spec-format.md ...)
#   lib/cmake/KernelEvolve/                                   find_package(KernelEvolve)
#   lib/pkgconfig/kernelevolve.pc, kernelevolve_cxx.pc       pkg-config
include(CMakePackageConfigHelpers)

# The library looks for kernelevolve-worker beside itself and in ../libexec/kernelevolve (see
# find_worker in src/eval/worker_evaluator.cpp). With a one-level library folder (lib, lib64) that is
# <prefix>/libexec/kernelevolve; with a multiarch one (lib/x86_64-linux-gnu) the worker goes beside it.
if(CMAKE_INSTALL_LIBDIR MATCHES "/")
  set(default_worker_dir ${CMAKE_INSTALL_LIBDIR})
else()
  set(default_worker_dir libexec/kernelevolve)
endif()
set(KE_INSTALL_WORKERDIR ${default_worker_dir} CACHE STRING
  "where kernelevolve-worker is installed, relative to the prefix (the library must find it from its own folder)")

# Installed binaries find the libraries of the same tree relative to themselves, and keep the folders
# of outside libraries they were linked with (LLVM's, when not in the system path).
set_target_properties(kernelevolve-cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
  INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(kernelevolve-worker PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(kernelevolve_cxx PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(kernelevolve PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS kernelevolve kernelevolve_cxx EXPORT KernelEvolveTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS kernelevolve-worker RUNTIME DESTINATION ${KE_INSTALL_WORKERDIR})
# The worker's Triton compile helper confines its forks with this library, found beside the worker.
set_target_properties(kernelevolve_confine PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS kernelevolve_confine LIBRARY DESTINATION ${KE_INSTALL_WORKERDIR})
install(TARGETS kernelevolve-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/capi/kernelevolve.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kernelevolve DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp")
# The model mutator reads its knowledge base from <library folder>/../share/kernelevolve/knowledge.
if(EXISTS ${PROJECT_SOURCE_DIR}/knowledge)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/knowledge/ DESTINATION ${CMAKE_INSTALL_DATADIR}/kernelevolve/knowledge
    FILES_MATCHING PATTERN "*.md")
endif()

# The README and the manual (docs/*.md, among them the spec format, which kernelevolve.h points to), laid out as in
# the source tree so that the README's links to docs/ resolve: a host that has only the installed package (a Rust or
# Go binding, say) still has the reference for the files it must write. CONFIGURE_DEPENDS: a page added to docs/ is
# installed without a fresh configure.
file(GLOB ke_doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/kernelevolve)
install(FILES ${ke_doc_pages} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/kernelevolve/docs)

set(KE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/KernelEvolve)
install(EXPORT KernelEvolveTargets NAMESPACE KernelEvolve:: DESTINATION ${KE_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/KernelEvolveConfig.cmake.in
  ${PROJECT_BINARY_DIR}/KernelEvolveConfig.cmake INSTALL_DESTINATION ${KE_CMAKE_DIR})
# The C ABI holds within a major version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KernelEvolveConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/KernelEvolveConfig.cmake ${PROJECT_BINARY_DIR}/KernelEvolveConfigVersion.cmake
  DESTINATION ${KE_CMAKE_DIR})

# pkg-config files that find their prefix from their own place (${pcfiledir}), so a tree installed
# with `cmake --install --prefix` anywhere, or moved, still describes itself.
file(RELATIVE_PATH KE_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" KE_PC_TO_PREFIX "${KE_PC_TO_PREFIX}")
foreach(pc kernelevolve kernelevolve_cxx)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
