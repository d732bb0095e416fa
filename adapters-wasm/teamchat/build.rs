//! A 64 KiB stack instead of Rust's default 1 MiB. The stack sits at the bottom of linear
//! memory, and the host zeroes every request's instance memory when it is freed, so a smaller
//! memory is a cheaper request; handling an event needs a few KiB of stack.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("wasm") {
        println!("cargo::rustc-link-arg-cdylib=-zstack-size=65536");
    }
}
