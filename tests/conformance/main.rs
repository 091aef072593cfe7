//! Differential conformance suite: every scenario runs once on real kernel AF_UNIX
//! sockets and once through a private udsfs mount; the two traces of operations and
//! results (return values, data bytes, errno names) must be equal.
//!
//! Needs root (/dev/fuse, and a private network namespace for the kernel side).
//! `kernel_vs_kernel_selfcheck` runs every scenario twice on the kernel, which checks
//! that the scenarios and their normalisation are deterministic.
//! `examples/show_traces.rs` prints both traces of a scenario side by side.

// examples/show_traces.rs compiles this file as a module, without the tests that use
// most of the harness.
#![cfg_attr(not(test), allow(dead_code))]

// The harness: the operations a scenario calls, the two backends, the mount.
mod backend;
mod kernel;
mod mount;
mod udsfs;

// The scenarios, by topic.
mod abstract_names;
mod autobind;
mod blocker;
mod blocking;
mod creds;
mod dgram;
mod path_names;
mod permissions;
mod rights;
mod stream;

// Checks that compare no traces.
mod file_views;
mod programs;

// The scenarios through `udsfs run`'s two fronts, and those only they run.
mod front_behaviours;
mod front_programs;
mod front_tstamp;
mod fronts;

use backend::Backend;

type Scenario = fn(&mut dyn Backend);
type Entries = Vec<(String, String)>;

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

#[test]
fn program_static_pass_any_fd() {
    programs::static_pass_any_fd();
}

#[test]
fn program_static_pidfds() {
    programs::static_pidfds();
}

#[test]
fn program_static_inflight_limit() {
    programs::static_inflight_limit();
}

/// The scenario table through each front, in the mount and routed: a test each;
/// the library also on a `--no-lanes` mount (the private mount has lanes, which the
/// library's scenarios get in the mount and routed).
macro_rules! fronts_tests {
    ($($name:ident: $front:ident, $place:ident;)*) => {
        $(#[test]
        fn $name() {
            fronts::check(fronts::Front::$front, fronts::Place::$place);
        })*
    };
}

fronts_tests! {
    fronts_library: Library, Mount;
    fronts_supervisor: Supervisor, Mount;
    fronts_library_routed: Library, Route;
    fronts_library_nolanes: Library, NoLanes;
    fronts_supervisor_routed: Supervisor, Route;
}

/// The child the `fronts_*` tests run under `udsfs run`: nothing unless they
/// started it.
#[test]
fn fronts_child() {
    fronts::child();
}

pub fn require_root() {
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
pub fn side_by_side(left: &str, a: &Entries, right: &str, b: &Entries) -> String {
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

pub fn run_udsfs(f: Scenario) -> (Entries, mount::Mount) {
    let mut u = udsfs::Udsfs::new(mount::Mount::new());
    f(&mut u);
    u.finish()
}

/// Run one scenario on both backends and compare.
fn differential(name: &str, f: Scenario) {
    require_root();
    let k = kernel::run_isolated(f);
    let (u, mount) = run_udsfs(f);
    if k != u {
        let log = mount.log_tail(60);
        let kept = mount.keep_log(name);
        drop(mount);
        panic!(
            "scenario {name}: udsfs differs from the kernel\n{}\n--- last daemon log lines \
             (full log: {}) ---\n{log}\n",
            side_by_side("kernel", &k, "udsfs", &u),
            kept.map(|p| p.display().to_string())
                .unwrap_or_else(|| "not kept".to_string()),
        );
    }
}

/// A table of scenarios by name: `name => function,` each.
macro_rules! scenario_table {
    ($($name:ident => $f:path,)*) => {
        &[$((stringify!($name), $f),)*]
    };
}

macro_rules! scenarios {
    ($($name:ident => $f:path,)*) => {
        /// Every scenario, for the self-check and examples/show_traces.rs.
        pub const ALL: &[(&str, Scenario)] = scenario_table! { $($name => $f,)* };
        $(
            #[test]
            fn $name() {
                differential(stringify!($name), $f);
            }
        )*
    };
}

scenarios! {
    // path names
    bind_same_path_twice => path_names::bind_same_path_twice,
    bind_stale_node_after_close => path_names::bind_stale_node_after_close,
    bind_missing_dir => path_names::bind_missing_dir,
    bind_parent_not_dir => path_names::bind_parent_not_dir,
    bind_twice_one_socket => path_names::bind_twice_one_socket,
    bind_over_existing_nodes => path_names::bind_over_existing_nodes,
    getsockname_relative_as_given => path_names::getsockname_relative_as_given,
    connect_missing_path => path_names::connect_missing_path,
    connect_stale_and_non_socket => path_names::connect_stale_and_non_socket,
    connect_type_mismatch_path => path_names::connect_type_mismatch_path,
    connect_through_symlink => path_names::connect_through_symlink,
    rename_keeps_connectable => path_names::rename_keeps_connectable,
    unlink_while_bound => path_names::unlink_while_bound,
    path_names_up_to_108 => path_names::path_names_up_to_108,
    connect_via_hard_link => path_names::connect_via_hard_link,
    rename_keeps_getsockname => path_names::rename_keeps_getsockname,
    bind_after_connect_changes_peername => path_names::bind_after_connect_changes_peername,
    accepted_socket_names => path_names::accepted_socket_names,
    mknod_socket_node => path_names::mknod_socket_node,
    connect_directory_cases => path_names::connect_directory_cases,
    // abstract names
    abstract_per_type => abstract_names::abstract_per_type,
    abstract_missing => abstract_names::abstract_missing,
    abstract_freed_on_close => abstract_names::abstract_freed_on_close,
    abstract_empty_name => abstract_names::abstract_empty_name,
    abstract_prefix_does_not_match => abstract_names::abstract_prefix_does_not_match,
    abstract_binary_name => abstract_names::abstract_binary_name,
    abstract_nul_names => abstract_names::abstract_nul_names,
    abstract_nonprintable_names => abstract_names::abstract_nonprintable_names,
    abstract_all_byte_values => abstract_names::abstract_all_byte_values,
    abstract_107_and_108 => abstract_names::abstract_107_and_108,
    abstract_name_held_by_any_handle => abstract_names::abstract_name_held_by_any_handle,
    abstract_freed_with_live_connections => abstract_names::abstract_freed_with_live_connections,
    // autobind
    autobind_format_and_idempotence => autobind::autobind_format_and_idempotence,
    bind_after_autobind => autobind::bind_after_autobind,
    autobind_stream_seqpacket => autobind::autobind_stream_seqpacket,
    autobind_idempotent_when_named => autobind::autobind_idempotent_when_named,
    bind_after_any_autobind => autobind::bind_after_any_autobind,
    implicit_autobind_stream_connect => autobind::implicit_autobind_stream_connect,
    implicit_autobind_seqpacket => autobind::implicit_autobind_seqpacket,
    implicit_autobind_dgram_connect => autobind::implicit_autobind_dgram_connect,
    implicit_autobind_dgram_send => autobind::implicit_autobind_dgram_send,
    implicit_autobind_dgram_socketpair => autobind::implicit_autobind_dgram_socketpair,
    no_autobind_listen_or_stream_send => autobind::no_autobind_listen_or_stream_send,
    autobind_name_shared_by_types => autobind::autobind_name_shared_by_types,
    // permissions and node modes
    perm_connect_needs_write => permissions::perm_connect_needs_write,
    perm_owner_group_other_classes => permissions::perm_owner_group_other_classes,
    perm_directory_search_and_write => permissions::perm_directory_search_and_write,
    perm_bind_needs_dir_write => permissions::perm_bind_needs_dir_write,
    perm_root_bypasses => permissions::perm_root_bypasses,
    perm_abstract_no_permissions => permissions::perm_abstract_no_permissions,
    umask_node_modes => permissions::umask_node_modes,
    perm_connect_directory => permissions::perm_connect_directory,
    // datagram sockets
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
    // stream and seqpacket sockets
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
    // credentials (SCM_CREDENTIALS, SO_PEERCRED)
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
    // passing sockets (SCM_RIGHTS) and the in-flight collector
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
    // blocking calls: one side blocks, another wakes it
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
    blocking_stream_write_timeout_finds_room => blocking::stream_write_timeout_finds_room,
    blocking_dgram_write_full_receiver_reads => blocking::dgram_write_full_receiver_reads,
    blocking_dgram_write_full_receiver_closes => blocking::dgram_write_full_receiver_closes,
    blocking_dgram_write_full_signal => blocking::dgram_write_full_signal,
    blocking_dgram_writers_one_slot_each => blocking::dgram_writers_one_slot_each,
    blocking_seqpacket_write_full_drain => blocking::seqpacket_write_full_drain,
    blocking_seqpacket_write_full_peer_closes => blocking::seqpacket_write_full_peer_closes,
    blocking_seqpacket_write_full_signal => blocking::seqpacket_write_full_signal,
    blocking_seqpacket_write_timeout_finds_room => blocking::seqpacket_write_timeout_finds_room,
    blocking_accept_woken_by_connect => blocking::accept_woken_by_connect,
    blocking_accept_seqpacket_woken_by_connect => blocking::accept_seqpacket_woken_by_connect,
    blocking_accept_signal => blocking::accept_signal,
    blocking_accept_listener_shutdown => blocking::accept_listener_shutdown,
    blocking_connect_backlog_ended_by_accept => blocking::connect_backlog_ended_by_accept,
    blocking_connect_backlog_listener_close => blocking::connect_backlog_listener_close,
    blocking_connect_backlog_received_socket => blocking::connect_backlog_received_socket,
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

/// Scenarios of calls the files have no form for: on the kernel and through the
/// fronts only (fronts.rs).
pub const FRONT_ONLY: &[(&str, Scenario)] = scenario_table! {
    front_other_family => front_behaviours::other_family,
    front_zero_length_address => front_behaviours::zero_length_address,
    front_fstat_fchmod_fchown => front_behaviours::fstat_fchmod_fchown,
    front_big_records => front_behaviours::big_records,
    front_epoll_before_connect => front_programs::epoll_before_connect,
    front_epoll_before_bind_and_sendto => front_programs::epoll_before_bind_and_sendto,
    front_sigio => front_programs::sigio,
    front_sigio_siginfo => front_programs::sigio_siginfo,
    front_stat_entry_points => front_programs::stat_entry_points,
    front_link_and_remove => front_programs::link_and_remove,
    front_peergroups_and_refusals => front_programs::peergroups_and_refusals,
    front_tstamp_dgram => front_tstamp::dgram,
    front_tstamp_seqpacket => front_tstamp::seqpacket,
    front_tstamp_stream => front_tstamp::stream,
    front_tstamp_timestamping => front_tstamp::timestamping,
    front_tstamp_before_bind => front_tstamp::before_bind,
};

/// Prints the kernel and udsfs traces of the scenario `want` (or of every scenario,
/// for "all") side by side, whether they agree or not.
pub fn show_traces(want: &str) {
    require_root();
    for (name, f) in ALL {
        if *name == want || want == "all" {
            let k = kernel::run_isolated(*f);
            let (u, _mount) = run_udsfs(*f);
            println!("=== {name}\n{}", side_by_side("kernel", &k, "udsfs", &u));
        }
    }
}

/// As `show_traces`, the kernel beside a front of `udsfs run`: `front` is
/// `library` or `supervisor`, with `_routed` for the roots under a `--route`
/// (`_nolanes`: on a `--no-lanes` mount; `_lanes`: scenarios in one network namespace).
pub fn show_front_traces(front: &str, want: &str) {
    use fronts::{Front, Place};
    let (f, place) = if let Some(f) = front.strip_suffix("_routed") {
        (f, Place::Route)
    } else if let Some(f) = front.strip_suffix("_nolanes") {
        (f, Place::NoLanes)
    } else {
        (front, Place::Mount)
    };
    let f = match f {
        "library" => Front::Library,
        "supervisor" => Front::Supervisor,
        _ => panic!(
            "no front {front:?}: library, supervisor, library_routed, supervisor_routed, library_nolanes"
        ),
    };
    fronts::show(f, place, want);
}

/// The child of `show_front_traces` (examples/show_traces.rs is its own child).
pub fn front_child() {
    fronts::child();
}

/// Every scenario twice on the kernel: the traces must be identical, so that a
/// difference against udsfs is never noise from the scenario itself.
#[test]
fn kernel_vs_kernel_selfcheck() {
    require_root();
    let mut failures = Vec::new();
    for (name, f) in ALL.iter().chain(FRONT_ONLY) {
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

/// A fork in another test thread copies that thread's descriptor table until its
/// exec. The kernel side's sockets must not be in it: a scenario's close is the
/// last close there, or the oracle itself is wrong (a closed socket's stale name
/// still answered connect, and the front "differed" from it).
#[test]
fn kernel_side_closes_despite_forks_elsewhere() {
    use std::os::unix::process::CommandExt;
    require_root();
    let f: Scenario = path_names::bind_stale_node_after_close;
    let want = kernel::run_isolated(f);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Several threads, each child sleeping a moment before its exec: a fork then
    // falls inside a scenario socket's short life often.
    let forkers: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut forks = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let mut c = std::process::Command::new("true");
                    // SAFETY: the child only sleeps (a raw call) before its exec.
                    unsafe {
                        c.pre_exec(|| {
                            libc::usleep(5_000);
                            Ok(())
                        });
                    }
                    c.status().expect("run true");
                    forks += 1;
                }
                forks
            })
        })
        .collect();
    let mut failures = Vec::new();
    let runs = 500;
    for run in 0..runs {
        let got = kernel::run_isolated(f);
        if got != want {
            failures.push(format!(
                "run {run}:\n{}",
                side_by_side("alone", &want, "forks", &got)
            ));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let forks: usize = forkers.into_iter().map(|t| t.join().expect("forker")).sum();
    assert!(forks > 0, "the forking thread never forked");
    assert!(
        failures.is_empty(),
        "{} of {runs} kernel runs differ while another thread forks:\n{}",
        failures.len(),
        failures.join("\n")
    );
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
