# Writes OUT: a C++ file that holds a Python package of ours, every file LISTING names (one absolute path a line,
# all under ROOT, the package's folder), as `const kernelevolve::PythonPackage NAMESPACE::SYMBOL`
# (src/core/python_package.hpp), each file by its path from ROOT's parent (ke_bridge/server.py). Run at build time
# by ke_embed_python (src/CMakeLists.txt), again whenever a file of the package or the listing changes.
#
#   cmake -DLISTING=FILE -DROOT=DIR -DOUT=FILE.cpp -DNAMESPACE=kernelevolve::pytorch -DSYMBOL=kBridgePackage
#         -P cmake/embed_python.cmake
foreach(arg LISTING ROOT OUT NAMESPACE SYMBOL)
  if(NOT DEFINED ${arg})
    message(FATAL_ERROR "embed_python.cmake: -D${arg}=... is required")
  endif()
endforeach()
get_filename_component(package "${ROOT}" NAME)
get_filename_component(parent "${ROOT}" DIRECTORY)
file(STRINGS "${LISTING}" files)
list(SORT files)
if(NOT files)
  message(FATAL_ERROR "embed_python.cmake: ${ROOT} holds no .py file")
endif()
set(entries "")
foreach(path IN LISTS files)
  file(RELATIVE_PATH name "${parent}" "${path}")
  file(READ "${path}" text)
  # Each file is a raw string literal, whose end is `)KE_PY"`: a file that holds it would end the literal early.
  string(FIND "${text}" ")KE_PY\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} holds )KE_PY\", which would end the raw string it is embedded in")
  endif()
  string(APPEND entries "    {\"${name}\", R\"KE_PY(${text})KE_PY\"},\n")
endforeach()
file(RELATIVE_PATH shown "${parent}/../.." "${ROOT}")
file(WRITE "${OUT}.new"
  "// Generated from ${shown} by cmake/embed_python.cmake: edit the package, not this file.\n"
  "#include \"core/python_package.hpp\"\n\n"
  "namespace ${NAMESPACE} {\n\n"
  "namespace {\n"
  "constexpr kernelevolve::PythonFile kFiles[] = {\n"
  "${entries}"
  "};\n"
  "}  // namespace\n\n"
  "extern const kernelevolve::PythonPackage ${SYMBOL};\n"
  "const kernelevolve::PythonPackage ${SYMBOL}{\"${package}\", kFiles, sizeof kFiles / sizeof kFiles[0]};\n\n"
  "}  // namespace ${NAMESPACE}\n")
# Rewritten only when it changed, so that a package saved unchanged compiles nothing again.
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
