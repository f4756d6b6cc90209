//! Embeds the one component artifact the workspace builds (`build/ctxkernel.wasm`,
//! or `$CTXK_COMPONENT`), so `ctxk` and this library run exactly those bytes.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=CTXK_COMPONENT");
    let path = match std::env::var_os("CTXK_COMPONENT") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../../build/ctxkernel.wasm"),
    };
    println!("cargo:rerun-if-changed={}", path.display());
    let path = path.canonicalize().unwrap_or_else(|_| {
        panic!("the ctxkernel component is missing at {}: run `make build`, which builds it first", path.display())
    });
    println!("cargo:rustc-env=CTXK_COMPONENT_PATH={}", path.display());
}
