# Sourced by scripts/bundle-gpu.sh and scripts/bundle-mpi.sh: the libraries a bundle carries for the lent GPU machine.
#
#   bundle_libraries TOOL BUILD BINARY...
#
# Copies into BUILD every library the binaries need that the GPU machine lacks, and sets the array `copied` to their
# names. Direct needs only (readelf's NEEDED), followed into what is copied: the transitive needs of the GPU
# machine's own libraries (LLVM's, curl's) are its business, and ldd here would list Debian's. TOOL names the
# script in its errors.

# Libraries the GPU machine has (or that its own libLLVM brings): never copied.
ke_gpu_machine_has='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+\.so|libgcc_s\.so|libLLVM-16|libclang-cpp\.so\.16|libcurl\.so|libsqlite3\.so|libz\.so|libzstd\.so|libudev\.so)'

bundle_libraries() {
  local tool=$1 build=$2
  shift 2
  local queue=("$@") bin name path
  copied=()
  while [ ${#queue[@]} -gt 0 ]; do
    bin=${queue[0]}
    queue=("${queue[@]:1}")
    [ -f "$bin" ] || continue
    while read -r name; do
      [[ "$name" =~ $ke_gpu_machine_has ]] && continue
      [ -e "$build/$name" ] && continue  # ours, or copied already
      path=$(ldd "$bin" | awk -v n="$name" '$1 == n && $2 == "=>" {print $3}')
      [ -n "$path" ] && [ -f "$path" ] || { echo "$tool: $bin needs $name, which is not found here" >&2; return 1; }
      cp -L "$path" "$build/$name"
      copied+=("$name")
      queue+=("$build/$name")
    done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
}
