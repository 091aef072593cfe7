//! Differential conformance suite: every scenario runs once on real kernel AF_UNIX
//! sockets and once through a private udsfs mount; the two traces of operations and
//! results (return values, data bytes, errno names) must be equal.
//!
//! Needs root (/dev/fuse, and a private network namespace for the kernel side).
//! `kernel_vs_kernel_selfcheck` runs every scenario twice on the kernel, which checks
//! that the scenarios and their normalisation are deterministic.

#[path = "conformance/backend.rs"]
mod backend;
#[path = "conformance/dgram.rs"]
mod dgram;
#[path = "conformance/kernel.rs"]
mod kernel;
#[path = "conformance/mount.rs"]
mod mount;
#[path = "conformance/names.rs"]
mod names;
#[path = "conformance/udsfs.rs"]
mod udsfs;
// stream / seqpacket (helper A)
#[path = "conformance/stream.rs"]
mod stream;
// names, permissions, connect view, /proc/net/unix (helper C)
#[path = "conformance/names2.rs"]
mod names2;
// credentials, rights and GC (helper B)
#[path = "conformance/creds.rs"]
mod creds;
#[path = "conformance/rights.rs"]
mod rights;
// blocking calls: one side blocks, another wakes it (issue 11)
#[path = "conformance/blocker.rs"]
mod blocker;
#[path = "conformance/blocking.rs"]
mod blocking;
// whole programs through `udsfs run` (issue 13: any fd in flight, pidfds)
#[path = "conformance/programs.rs"]
mod programs;

#[test]
fn program_pass_any_fd() {
    programs::pass_any_fd();
}

#[test]
fn program_pidfds() {
    programs::pidfds();
}

#[test]
fn program_inflight_limit() {
    programs::inflight_limit();
}

use backend::Backend;

type Scenario = fn(&mut dyn Backend);
type Entries = Vec<(String, String)>;

fn require_root() {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        panic!(
            "the udsfs conformance suite must run as root: it mounts FUSE file systems \
             (/dev/fuse) and gives the kernel side its own network namespace"
        );
    }
}

fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        format!("{s:<w$}")
    } else {
        let t: String = s.chars().take(w - 1).collect();
        format!("{t}…")
    }
}

/// Side-by-side rendering of two traces; `!!` marks lines that differ, and those
/// lines are repeated in full below the row.
fn side_by_side(left: &str, a: &Entries, right: &str, b: &Entries) -> String {
    const OP: usize = 48;
    const RES: usize = 40;
    let (lh, rh) = (format!("{left} result"), format!("{right} result"));
    let mut out = format!("         {:<OP$} {lh:<RES$} | {rh}\n", "operation");
    let missing = ("(missing)".to_string(), String::new());
    for i in 0..a.len().max(b.len()) {
        let (oa, ra) = a.get(i).unwrap_or(&missing);
        let (ob, rb) = b.get(i).unwrap_or(&missing);
        let same = oa == ob && ra == rb;
        let mark = if same { "  " } else { "!!" };
        out.push_str(&format!(
            "{mark} {i:>4} {} {} | {}\n",
            cut(oa, OP),
            cut(ra, RES),
            if oa == ob {
                rb.clone()
            } else {
                format!("{rb}   [{right} op differs]")
            }
        ));
        if !same {
            out.push_str(&format!("           {left:>8}: {oa} => {ra}\n"));
            out.push_str(&format!("           {right:>8}: {ob} => {rb}\n"));
        }
    }
    out
}

fn run_udsfs(f: Scenario) -> (Entries, mount::Mount) {
    let mut u = udsfs::Udsfs::new(mount::Mount::new());
    f(&mut u);
    u.finish()
}

/// Scenarios known to differ from the kernel today, and why. They still run and
/// still fail (so the suite keeps reporting them); the failure names the cause.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// Run one scenario on both backends and compare.
fn differential(name: &str, f: Scenario) {
    require_root();
    let k = kernel::run_isolated(f);
    let (u, mount) = run_udsfs(f);
    if k != u {
        let log = mount.log_tail(60);
        let kept = mount.keep_log(name);
        drop(mount);
        let known = KNOWN_DIFFERENCES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, why)| format!(" (known difference: {why})"))
            .unwrap_or_default();
        panic!(
            "scenario {name}: udsfs differs from the kernel{known}\n{}\n--- last daemon log lines \
             (full log: {}) ---\n{log}\n",
            side_by_side("kernel", &k, "udsfs", &u),
            kept.map(|p| p.display().to_string())
                .unwrap_or_else(|| "not kept".to_string()),
        );
    }
}

macro_rules! scenarios {
    ($($name:ident => $f:path,)*) => {
        /// Every scenario, for the self-check.
        const ALL: &[(&str, Scenario)] = &[$((stringify!($name), $f),)*];
        $(
            #[test]
            fn $name() {
                differential(stringify!($name), $f);
            }
        )*
    };
}

scenarios! {
    // names: binding
    bind_same_path_twice => names::bind_same_path_twice,
    bind_stale_node_after_close => names::bind_stale_node_after_close,
    bind_missing_dir => names::bind_missing_dir,
    bind_parent_not_dir => names::bind_parent_not_dir,
    bind_twice_one_socket => names::bind_twice_one_socket,
    bind_over_existing_nodes => names::bind_over_existing_nodes,
    getsockname_relative_as_given => names::getsockname_relative_as_given,
    // names: autobind
    autobind_format_and_idempotence => names::autobind_format_and_idempotence,
    bind_after_autobind => names::bind_after_autobind,
    // names: connect by path
    connect_missing_path => names::connect_missing_path,
    connect_stale_and_non_socket => names::connect_stale_and_non_socket,
    connect_type_mismatch_path => names::connect_type_mismatch_path,
    connect_through_symlink => names::connect_through_symlink,
    rename_keeps_connectable => names::rename_keeps_connectable,
    unlink_while_bound => names::unlink_while_bound,
    // names: abstract
    abstract_per_type => names::abstract_per_type,
    abstract_missing => names::abstract_missing,
    abstract_freed_on_close => names::abstract_freed_on_close,
    abstract_empty_name => names::abstract_empty_name,
    abstract_prefix_does_not_match => names::abstract_prefix_does_not_match,
    abstract_binary_name => names::abstract_binary_name,
    // dgram data path
    dgram_message_boundaries => dgram::message_boundaries,
    dgram_truncation => dgram::truncation,
    dgram_zero_length => dgram::zero_length,
    dgram_emsgsize => dgram::emsgsize,
    dgram_qlen_limit => dgram::qlen_limit,
    dgram_qlen_shared_by_senders => dgram::qlen_shared_by_senders,
    dgram_mutual_pair_no_qlen => dgram::mutual_pair_no_qlen,
    dgram_socketpair_no_qlen => dgram::socketpair_no_qlen,
    dgram_enotconn_unconnected => dgram::enotconn_unconnected,
    dgram_emsgsize_before_enotconn => dgram::emsgsize_before_enotconn,
    dgram_peer_closed => dgram::peer_closed,
    dgram_socketpair_peer_closed => dgram::socketpair_peer_closed,
    dgram_peer_name_rebound => dgram::peer_name_rebound,
    dgram_getpeername_dead_peer => dgram::getpeername_dead_peer,
    dgram_eperm_connected_elsewhere => dgram::eperm_connected_elsewhere,
    dgram_sendto_own_address => dgram::sendto_own_address,
    dgram_recvfrom_sender_names => dgram::recvfrom_sender_names,
    dgram_socketpair_both_ways => dgram::socketpair_both_ways,
    dgram_shutdown_wr => dgram::shutdown_wr,
    dgram_shutdown_rd => dgram::shutdown_rd,
    dgram_reconnect => dgram::reconnect,
    dgram_sendto_while_connected => dgram::sendto_while_connected,
    dgram_reconnect_resets_old_peer => dgram::reconnect_resets_old_peer,
    dgram_listen_eopnotsupp => dgram::listen_eopnotsupp,
    // stream / seqpacket (helper A)
    stream_listen_accept_basic => stream::listen_accept_basic,
    stream_seqpacket_listen_accept => stream::seqpacket_listen_accept,
    stream_listen_errors => stream::listen_errors,
    stream_listen_on_connected => stream::listen_on_connected,
    stream_listen_twice => stream::listen_twice,
    stream_backlog_stream => stream::backlog_stream,
    stream_backlog_seqpacket => stream::backlog_seqpacket,
    stream_accept_frees_slot => stream::accept_frees_slot,
    stream_accept_nonblocking_eagain => stream::accept_nonblocking_eagain,
    stream_accept_errors => stream::accept_errors,
    stream_connect_not_listening => stream::connect_not_listening,
    stream_connect_again => stream::connect_again,
    stream_connect_again_not_listening => stream::connect_again_not_listening,
    stream_connect_on_listener => stream::connect_on_listener,
    stream_coalescing_reads => stream::coalescing_reads,
    stream_partial_reads => stream::partial_reads,
    stream_send_errors => stream::send_errors,
    stream_recv_errors => stream::recv_errors,
    stream_eof_after_peer_close => stream::eof_after_peer_close,
    stream_epipe_after_peer_close => stream::epipe_after_peer_close,
    stream_econnreset_unread_recv_first => stream::econnreset_unread_recv_first,
    stream_econnreset_unread_send_first => stream::econnreset_unread_send_first,
    stream_shutdown_wr => stream::shutdown_wr,
    stream_shutdown_rd => stream::shutdown_rd,
    stream_shutdown_rdwr => stream::shutdown_rdwr,
    stream_shutdown_unconnected_and_listener => stream::shutdown_unconnected_and_listener,
    stream_listener_shutdown_rd => stream::listener_shutdown_rd,
    stream_listener_closed_pending_client => stream::listener_closed_pending_client,
    stream_client_closed_before_accept => stream::client_closed_before_accept,
    stream_send_before_accept => stream::send_before_accept,
    stream_backpressure_4k => stream::backpressure_4k,
    stream_backpressure_1byte => stream::backpressure_1byte,
    stream_big_send_partial => stream::big_send_partial,
    stream_zero_length_send => stream::zero_length_send,
    stream_seqpacket_boundaries => stream::seqpacket_boundaries,
    stream_seqpacket_truncation => stream::seqpacket_truncation,
    stream_seqpacket_zero_length => stream::seqpacket_zero_length,
    stream_seqpacket_unconnected => stream::seqpacket_unconnected,
    stream_seqpacket_sendto_connected => stream::seqpacket_sendto_connected,
    stream_seqpacket_peer_closed => stream::seqpacket_peer_closed,
    stream_seqpacket_peer_closed_unread_send => stream::seqpacket_peer_closed_unread_send,
    stream_seqpacket_peer_closed_unread_recv => stream::seqpacket_peer_closed_unread_recv,
    stream_seqpacket_backpressure => stream::seqpacket_backpressure,
    stream_backpressure_by_size => stream::backpressure_by_size,
    stream_seqpacket_emsgsize => stream::seqpacket_emsgsize,
    stream_sigpipe_stream => stream::sigpipe_stream,
    stream_sigpipe_seqpacket => stream::sigpipe_seqpacket,
    stream_connect_check_order => stream::connect_check_order,
    stream_poll_idle_connected => stream::poll_idle_connected,
    stream_poll_peer_shut_wr => stream::poll_peer_shut_wr,
    stream_poll_peer_closed => stream::poll_peer_closed,
    stream_poll_peer_closed_unread => stream::poll_peer_closed_unread,
    stream_poll_unconnected => stream::poll_unconnected,
    stream_poll_listener => stream::poll_listener,
    stream_socketpair_stream => stream::socketpair_stream,
    stream_socketpair_seqpacket => stream::socketpair_seqpacket,
    // names, permissions (helper C)
    names2_abstract_nul_names => names2::abstract_nul_names,
    names2_abstract_nonprintable_names => names2::abstract_nonprintable_names,
    names2_abstract_all_byte_values => names2::abstract_all_byte_values,
    names2_abstract_107_and_108 => names2::abstract_107_and_108,
    names2_path_names_up_to_108 => names2::path_names_up_to_108,
    names2_autobind_stream_seqpacket => names2::autobind_stream_seqpacket,
    names2_autobind_idempotent_when_named => names2::autobind_idempotent_when_named,
    names2_bind_after_any_autobind => names2::bind_after_any_autobind,
    names2_implicit_autobind_stream_connect => names2::implicit_autobind_stream_connect,
    names2_implicit_autobind_seqpacket => names2::implicit_autobind_seqpacket,
    names2_implicit_autobind_dgram_connect => names2::implicit_autobind_dgram_connect,
    names2_implicit_autobind_dgram_send => names2::implicit_autobind_dgram_send,
    names2_implicit_autobind_dgram_socketpair => names2::implicit_autobind_dgram_socketpair,
    names2_no_autobind_listen_or_stream_send => names2::no_autobind_listen_or_stream_send,
    names2_autobind_name_shared_by_types => names2::autobind_name_shared_by_types,
    names2_abstract_name_held_by_any_handle => names2::abstract_name_held_by_any_handle,
    names2_abstract_freed_with_live_connections => names2::abstract_freed_with_live_connections,
    names2_connect_via_hard_link => names2::connect_via_hard_link,
    names2_rename_keeps_getsockname => names2::rename_keeps_getsockname,
    names2_bind_after_connect_changes_peername => names2::bind_after_connect_changes_peername,
    names2_accepted_socket_names => names2::accepted_socket_names,
    names2_mknod_socket_node => names2::mknod_socket_node,
    names2_connect_directory_cases => names2::connect_directory_cases,
    names2_perm_connect_needs_write => names2::perm_connect_needs_write,
    names2_perm_owner_group_other_classes => names2::perm_owner_group_other_classes,
    names2_perm_directory_search_and_write => names2::perm_directory_search_and_write,
    names2_perm_bind_needs_dir_write => names2::perm_bind_needs_dir_write,
    names2_perm_root_bypasses => names2::perm_root_bypasses,
    names2_perm_abstract_no_permissions => names2::perm_abstract_no_permissions,
    names2_umask_node_modes => names2::umask_node_modes,
    names2_perm_connect_directory => names2::perm_connect_directory,
    // credentials, rights and GC (helper B)
    creds_matrix_dgram => creds::matrix_dgram,
    creds_matrix_stream => creds::matrix_stream,
    creds_matrix_seqpacket => creds::matrix_seqpacket,
    creds_matrix_connected => creds::matrix_connected,
    creds_embryo_stream => creds::embryo_stream,
    creds_embryo_seqpacket => creds::embryo_seqpacket,
    creds_explicit_root => creds::explicit_root,
    creds_explicit_unprivileged => creds::explicit_unprivileged,
    creds_stream_no_merge => creds::stream_no_merge,
    creds_peercred => creds::peercred,
    creds_accept_inherits_passcred => creds::accept_inherits_passcred,
    creds_autobind => creds::autobind,
    creds_autobind_before_lookup => creds::autobind_before_lookup,
    creds_autobind_seqpacket_send => creds::autobind_seqpacket_send,
    creds_peercred_effective_ids => creds::peercred_effective_ids,
    rights_self_ref_stream => rights::self_ref_stream,
    rights_self_ref_dgram => rights::self_ref_dgram,
    rights_self_ref_seqpacket => rights::self_ref_seqpacket,
    rights_cross_stream => rights::cross_stream,
    rights_cross_dgram => rights::cross_dgram,
    rights_cross_seqpacket => rights::cross_seqpacket,
    rights_triangle_stream => rights::triangle_stream,
    rights_triangle_dgram => rights::triangle_dgram,
    rights_cross_edge => rights::cross_edge,
    rights_backtrack_from_scc => rights::backtrack_from_scc,
    rights_mixed_lowpoint => rights::mixed_lowpoint,
    rights_listener_self_stream => rights::listener_self_stream,
    rights_listener_self_seqpacket => rights::listener_self_seqpacket,
    rights_listener_triangle => rights::listener_triangle,
    rights_listener_cross_edge => rights::listener_cross_edge,
    rights_passed_socket_works => rights::passed_socket_works,
    rights_passed_listener_accepts => rights::passed_listener_accepts,
    rights_cycle_one_open => rights::cycle_one_open,
    rights_reachable_not_collected => rights::reachable_not_collected,
    rights_cycle_also_held_outside => rights::cycle_also_held_outside,
    rights_embryo_accepted => rights::embryo_accepted,
    rights_max_fd_dgram => rights::max_fd_dgram,
    rights_max_fd_stream => rights::max_fd_stream,
    rights_zero_length_with_rights => rights::zero_length_with_rights,
    rights_recv_without_control => rights::recv_without_control,
    rights_stream_barrier => rights::stream_barrier,
    rights_etoomanyrefs => rights::etoomanyrefs,
    rights_sendto_with_rights => rights::sendto_with_rights,
    rights_embryo_accepted_receive => rights::embryo_accepted_receive,
    rights_cycle_dup_open => rights::cycle_dup_open,
    // blocking calls (issue 11)
    blocking_stream_read_woken_by_write => blocking::stream_read_woken_by_write,
    blocking_dgram_read_woken_by_write => blocking::dgram_read_woken_by_write,
    blocking_seqpacket_read_woken_by_write => blocking::seqpacket_read_woken_by_write,
    blocking_stream_read_peer_close => blocking::stream_read_peer_close,
    blocking_dgram_read_peer_close => blocking::dgram_read_peer_close,
    blocking_seqpacket_read_peer_close => blocking::seqpacket_read_peer_close,
    blocking_stream_read_peer_shut_wr => blocking::stream_read_peer_shut_wr,
    blocking_dgram_read_peer_shut_wr => blocking::dgram_read_peer_shut_wr,
    blocking_seqpacket_read_peer_shut_wr => blocking::seqpacket_read_peer_shut_wr,
    blocking_stream_read_own_shut_rd => blocking::stream_read_own_shut_rd,
    blocking_dgram_read_own_shut_rd => blocking::dgram_read_own_shut_rd,
    blocking_seqpacket_read_own_shut_rd => blocking::seqpacket_read_own_shut_rd,
    blocking_stream_read_after_own_shut_rd => blocking::stream_read_after_own_shut_rd,
    blocking_dgram_read_after_own_shut_rd => blocking::dgram_read_after_own_shut_rd,
    blocking_seqpacket_read_after_own_shut_rd => blocking::seqpacket_read_after_own_shut_rd,
    blocking_stream_read_signal => blocking::stream_read_signal,
    blocking_dgram_read_signal => blocking::dgram_read_signal,
    blocking_seqpacket_read_signal => blocking::seqpacket_read_signal,
    blocking_stream_write_drain_little_then_signal => blocking::stream_write_drain_little_then_signal,
    blocking_stream_write_drain_all => blocking::stream_write_drain_all,
    blocking_stream_write_partial_reader_closes => blocking::stream_write_partial_reader_closes,
    blocking_stream_write_full_reader_closes => blocking::stream_write_full_reader_closes,
    blocking_stream_write_full_reader_shut_rd => blocking::stream_write_full_reader_shut_rd,
    blocking_stream_write_full_signal => blocking::stream_write_full_signal,
    blocking_dgram_write_full_receiver_reads => blocking::dgram_write_full_receiver_reads,
    blocking_dgram_write_full_receiver_closes => blocking::dgram_write_full_receiver_closes,
    blocking_dgram_write_full_signal => blocking::dgram_write_full_signal,
    blocking_dgram_writers_one_slot_each => blocking::dgram_writers_one_slot_each,
    blocking_seqpacket_write_full_drain => blocking::seqpacket_write_full_drain,
    blocking_seqpacket_write_full_peer_closes => blocking::seqpacket_write_full_peer_closes,
    blocking_seqpacket_write_full_signal => blocking::seqpacket_write_full_signal,
    blocking_accept_woken_by_connect => blocking::accept_woken_by_connect,
    blocking_accept_seqpacket_woken_by_connect => blocking::accept_seqpacket_woken_by_connect,
    blocking_accept_signal => blocking::accept_signal,
    blocking_accept_listener_shutdown => blocking::accept_listener_shutdown,
    blocking_connect_backlog_ended_by_accept => blocking::connect_backlog_ended_by_accept,
    blocking_connect_backlog_listener_close => blocking::connect_backlog_listener_close,
    blocking_connect_backlog_signal => blocking::connect_backlog_signal,
    blocking_connect_backlog_seqpacket => blocking::connect_backlog_seqpacket,
    blocking_connect_backlog_two_waiters => blocking::connect_backlog_two_waiters,
    blocking_rights_parked_send => blocking::rights_parked_send,
    blocking_dgram_recvmsg_woken_by_rights => blocking::dgram_recvmsg_woken_by_rights,
    blocking_stream_recvmsg_woken_by_rights => blocking::stream_recvmsg_woken_by_rights,
    blocking_rights_parked_send_signal => blocking::rights_parked_send_signal,
    blocking_stream_msg_partial_eagain => blocking::stream_msg_partial_eagain,
    blocking_stream_msg_partial_signal => blocking::stream_msg_partial_signal,
    blocking_dgram_readers_one_message_each => blocking::dgram_readers_one_message_each,
    blocking_dgram_more_readers_than_messages => blocking::dgram_more_readers_than_messages,
    blocking_seqpacket_readers_one_record_each => blocking::seqpacket_readers_one_record_each,
}

/// Every scenario twice on the kernel: the traces must be identical, so that a
/// difference against udsfs is never noise from the scenario itself.
#[test]
fn kernel_vs_kernel_selfcheck() {
    require_root();
    let mut failures = Vec::new();
    for (name, f) in ALL {
        let a = kernel::run_isolated(*f);
        let b = kernel::run_isolated(*f);
        if a.is_empty() {
            failures.push(format!("scenario {name} recorded nothing"));
        }
        if let Some((op, res)) = a.iter().find(|(_, r)| r.contains("HARNESS")) {
            failures.push(format!("scenario {name}: harness error at {op}: {res}"));
        }
        if a != b {
            failures.push(format!(
                "scenario {name} is not deterministic on the kernel:\n{}",
                side_by_side("run 1", &a, "run 2", &b)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `UDSFS_CONFORMANCE_SHOW=name cargo test --test conformance show_traces -- --nocapture`
/// prints the kernel and udsfs traces of one scenario (or `all`) side by side, whether
/// they agree or not (a development aid; without the variable it does nothing).
#[test]
fn show_traces() {
    let Ok(want) = std::env::var("UDSFS_CONFORMANCE_SHOW") else {
        return;
    };
    require_root();
    for (name, f) in ALL {
        if *name == want || want == "all" {
            let k = kernel::run_isolated(*f);
            let (u, _mount) = run_udsfs(*f);
            println!("=== {name}\n{}", side_by_side("kernel", &k, "udsfs", &u));
        }
    }
}

/// The harness's own normalisation, checked without any backend.
#[test]
fn harness_normalisation() {
    use backend::{Name, Trace, escape, unescape};
    let mut t = Trace::default();
    assert_eq!(t.name(&Name::Abstract(b"0a1b2".to_vec())), "@<auto#1>");
    assert_eq!(t.name(&Name::Abstract(b"fffff".to_vec())), "@<auto#2>");
    assert_eq!(t.name(&Name::Abstract(b"0a1b2".to_vec())), "@<auto#1>");
    // Not the autobind format: shown as is, so a wrong format is a mismatch.
    assert_eq!(t.name(&Name::Abstract(b"0A1B2".to_vec())), "@0A1B2");
    assert_eq!(t.name(&Name::Abstract(b"0a1b".to_vec())), "@0a1b");
    assert_eq!(t.name(&Name::Abstract(b"0a1b23".to_vec())), "@0a1b23");
    assert_eq!(t.name(&Name::Abstract(b"x y\0".to_vec())), "@x y\\x00");
    assert_eq!(t.name(&Name::Unnamed), "(unnamed)");
    let raw: &[u8] = b"\x01a b\\c@\xff\n\0";
    assert_eq!(escape(raw), "\\x01a\\x20b\\x5cc@\\xff\\x0a\\x00");
    assert_eq!(unescape(&escape(raw)), raw);
    assert_eq!(unescape("a\\\\b\\x00"), b"a\\b\0");
}
