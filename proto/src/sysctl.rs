//! Reading sysctls (`/proc/sys`), for the daemon and its clients alike.

/// A numeric sysctl, by its dotted name (`net.unix.max_dgram_qlen`).
pub fn read(name: &str) -> Option<u64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// net.core's default socket buffer sizes when /proc/sys cannot tell.
pub const CORE_MEM_FALLBACK: u64 = 212992;

/// A `net.core` buffer size (`wmem_default`, `rmem_max`, ...).
pub fn core_mem(name: &str) -> u64 {
    read(&format!("net.core.{name}")).unwrap_or(CORE_MEM_FALLBACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_refuses_the_rest() {
        assert!(read("kernel.pid_max").is_some_and(|n| n > 0));
        assert_eq!(read("kernel.ostype"), None, "not a number");
        assert_eq!(read("no.such.sysctl"), None);
        assert!(core_mem("wmem_default") > 0);
    }
}
