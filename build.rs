//! Link step of the `codemode` binary.
//!
//! On Linux with glibc, the binary's relative relocations (about 51,000 of
//! them: a position-independent 43 MB executable) are packed as `DT_RELR`
//! (`-z pack-relative-relocs`, GNU ld 2.38+, lld 15+, glibc 2.36+). The
//! dynamic loader then applies them from a bitmap instead of one 24-byte
//! record each: about 0.9M fewer instructions at every process start
//! (docs/PERFORMANCE.md, "`codemode run` of `return 1`"). Set
//! `CODEMODE_NO_PACKED_RELOCS=1` to build without it (an older linker or a
//! binary meant for a glibc older than 2.36).

fn main() {
    println!("cargo:rerun-if-env-changed=CODEMODE_NO_PACKED_RELOCS");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" && std::env::var_os("CODEMODE_NO_PACKED_RELOCS").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
