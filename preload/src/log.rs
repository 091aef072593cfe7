//! Refusals and surprises go to stderr, one line each, naming the cause:
//! the program gets an errno, its user learns why.

pub fn say(msg: &str) {
    let line = format!("udsfs-preload[{}]: {msg}\n", std::process::id());
    // SAFETY: writes a valid buffer to fd 2; a failure is ignored.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}
