//! Embeds the one component artifact the workspace builds (`build/ctxkernel.wasm`,
//! or `$CTXK_COMPONENT`), so `ctxk` and this library run exactly those bytes,
//! and names it by its sha256 as every host's package does.

use sha2::{Digest, Sha256};
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
    let component = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let digest: String = Sha256::digest(&component).iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=CTXK_COMPONENT_SHA256={digest}");
}
