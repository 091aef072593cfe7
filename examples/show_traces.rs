//! Prints the kernel and udsfs traces of one conformance scenario side by side, whether
//! they agree or not (a development aid; run as root, after `cargo build --workspace`):
//!
//! `cargo run --example show_traces -- SCENARIO` (a test name of
//! `cargo test --test conformance -- --list`, or `all`): the kernel beside the files;
//! `cargo run --example show_traces -- --front FRONT SCENARIO`: the kernel beside a
//! front of `udsfs run` (`library`, `supervisor`, `library_routed`,
//! `supervisor_routed`, `library_nolanes`; the scenarios of `FRONT_ONLY` too).

#[path = "../tests/conformance/main.rs"]
mod conformance;

fn main() {
    // Under `udsfs run`, started by show_front_traces: the child.
    if std::env::var_os("UCONF_FRONT_OUT").is_some() {
        conformance::front_child();
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, front, want] if flag == "--front" => conformance::show_front_traces(front, want),
        [want] => conformance::show_traces(want),
        _ => {
            eprintln!("usage: show_traces [--front FRONT] SCENARIO|all");
            std::process::exit(2);
        }
    }
}
