//! Prints the kernel and udsfs traces of one conformance scenario side by side, whether
//! they agree or not (a development aid; run as root):
//!
//! `cargo run --example show_traces -- SCENARIO` (a test name of
//! `cargo test --test conformance -- --list`, or `all`).

#[path = "../tests/conformance/main.rs"]
mod conformance;

fn main() {
    let Some(want) = std::env::args().nth(1) else {
        eprintln!("usage: show_traces SCENARIO|all");
        std::process::exit(2);
    };
    conformance::show_traces(&want);
}
