// Links libkernelevolve. Where from: KERNELEVOLVE_LIB_DIR if set (ctest sets it to the build tree),
// else `pkg-config --variable=libdir kernelevolve` (an installed tree), else the linker's default path.
// The directory is also written into the binary's run path, so it runs without LD_LIBRARY_PATH.
use std::env;
use std::process::Command;

fn pkg_config_libdir() -> Option<String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "kernelevolve"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if dir.is_empty() {
        None
    } else {
        Some(dir)
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=KERNELEVOLVE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let dir = env::var("KERNELEVOLVE_LIB_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .or_else(pkg_config_libdir);
    if let Some(dir) = dir {
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
    println!("cargo:rustc-link-lib=dylib=kernelevolve");
}
