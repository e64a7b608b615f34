//! The uniffi code generator, pinned to the same uniffi version as the
//! library so the generated Kotlin/Swift/Python match its scaffolding.
#![forbid(unsafe_code)]
fn main() {
    uniffi::uniffi_bindgen_main()
}
