//! Builds the C++ shim over the reference UDT4 library (Debian's `libudt-dev`) when its header
//! is installed; otherwise the crate is built without UDT, and every UDT call (`haul cp
//! --transport udt`, `haul profile --transport udt`) fails with an error that says so.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=csrc/udt_shim.cpp");
    println!("cargo:rerun-if-env-changed=HAUL_UDT_INCLUDE");
    println!("cargo:rustc-check-cfg=cfg(haul_udt)");
    let include = std::env::var("HAUL_UDT_INCLUDE").unwrap_or_else(|_| "/usr/include/udt".into());
    let header = Path::new(&include).join("udt.h");
    // Watch the header, or the nearest directory above it that exists, so that installing
    // libudt-dev later re-runs this check (a missing path would re-run it on every build).
    let watched = header
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    println!("cargo:rerun-if-changed={}", watched.display());
    if !header.exists() {
        println!("cargo:warning=udt.h not found in {include}: building haul without UDT (install libudt-dev for `--transport udt`)");
        return;
    }
    cc::Build::new()
        .cpp(true)
        .file("csrc/udt_shim.cpp")
        .include(&include)
        .flag_if_supported("-std=c++11")
        .flag_if_supported("-Wno-deprecated-declarations")
        .compile("haul_udt_shim");
    // libudt itself is loaded with dlopen on first use (see csrc/udt_shim.cpp).
    println!("cargo:rustc-link-lib=stdc++");
    println!("cargo:rustc-cfg=haul_udt");
}
