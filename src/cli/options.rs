//! Mount options: the `udsfs mount` flags, their `-o name=value` spellings, the
//! standard options mount(8) passes, and the mount-helper form
//! `udsfs SOURCE MOUNTPOINT -o OPTIONS` that mount.fuse3(8) runs.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Args};
use fuser::MountOption;

#[derive(Args, Clone)]
pub struct MountArgs {
    /// Return once the mount answers requests; print the daemon's PID.
    #[arg(long)]
    pub background: bool,
    /// Let other users in (kernel default_permissions is always on).
    #[arg(long)]
    pub allow_other: bool,
    /// FUSE worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Name-table buckets per half (1 = one lock, as before seed 003).
    #[arg(long, default_value_t = 256)]
    pub hash_buckets: usize,
    /// Datagram queue length (default: the host's net.unix.max_dgram_qlen).
    #[arg(long)]
    pub max_dgram_qlen: Option<usize>,
    /// Send buffer of new sockets, in bytes.
    #[arg(long, default_value_t = 212992)]
    pub sndbuf: usize,
    /// Sockets in flight that trigger a collection.
    #[arg(long, default_value_t = 16000)]
    pub gc_trigger: usize,
    /// Directories, socket nodes and symlinks the tree may hold (ENOSPC beyond).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_nodes: usize,
    /// Collect garbage only when `run` is written to .udsfs/gc (to look at dead
    /// cycles with `udsfs graph` before they go).
    #[arg(long)]
    pub gc_manual: bool,
    /// Requests that may wait in the daemon at once (ENOBUFS beyond).
    #[arg(long, default_value_t = 65536)]
    pub max_parked: u64,
    /// Bytes that waiting writes and partly written msg records may hold
    /// (ENOBUFS beyond); the text open listings keep (.udsfs/unix, graph,
    /// faults, gc, fdchannel, status files, abstract) and msg records read
    /// in pieces may hold as much again (ENOMEM beyond).
    #[arg(long, default_value_t = 256 << 20)]
    pub max_held_bytes: u64,
    /// Bytes all sockets' receive queues may hold at once, as each sender's
    /// SO_SNDBUF counts them (ENOBUFS beyond; 0: no bound).
    #[arg(long, default_value_t = 1 << 30)]
    pub max_queued_bytes: u64,
    /// Sockets the mount's clients may make (ENFILE beyond).
    #[arg(long, default_value_t = 1 << 20)]
    pub max_sockets: u64,
    /// With --allow-other: the percentage of each bound (nodes, sockets,
    /// parked requests, bytes held) one user other than root may take.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub user_share: u64,
    /// Who may open .udsfs/capture: `users` (each sees the messages of the
    /// sockets they could open) or `root` only.
    #[arg(long, value_name = "WHO", default_value = "users", value_parser = ["users", "root"])]
    pub capture: String,
    /// No fast lanes: every byte through the daemon's FUSE requests. Without
    /// it the plain bytes of a connected stream or seqpacket socket whose
    /// ends are each used by one process running the library go through
    /// shared memory (issue 30, docs/LANE.md).
    #[arg(long)]
    pub no_lanes: bool,
    /// Lanes are the default: `--lanes` (`-o lanes`) is still taken, for
    /// command lines and fstab entries written before.
    #[arg(long, hide = true, conflicts_with = "no_lanes")]
    pub lanes: bool,
    /// Run as mount(8)'s helper: in the background, printing nothing.
    #[arg(long, hide = true)]
    pub helper: bool,
    /// Where the daemon logs when it runs in the background.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// Mount options, comma-separated: every long option above as name[=value]
    /// (allow_other,threads=4,max_dgram_qlen=5) and the standard ones
    /// (rw, ro, nosuid, nodev, noexec, noatime, _netdev, defaults, ...).
    #[arg(short = 'o', value_name = "OPTIONS", value_delimiter = ',')]
    pub options: Vec<String>,
    #[arg(default_value = "mountpoints/default")]
    pub mountpoint: PathBuf,
}

/// Standard options the kernel applies to the mount, each beside its
/// opposite.
#[rustfmt::skip]
const KERNEL: [(&str, MountOption); 13] = [
    ("rw", MountOption::RW), ("ro", MountOption::RO),
    ("dev", MountOption::Dev), ("nodev", MountOption::NoDev),
    ("suid", MountOption::Suid), ("nosuid", MountOption::NoSuid),
    ("exec", MountOption::Exec), ("noexec", MountOption::NoExec),
    ("atime", MountOption::Atime), ("noatime", MountOption::NoAtime),
    ("sync", MountOption::Sync), ("async", MountOption::Async),
    ("dirsync", MountOption::DirSync),
];

/// Standard options meant for mount(8), fstab or systemd, or always in force
/// here (default_permissions): accepted and ignored.
const IGNORED: [&str; 17] = [
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "relatime",
    "norelatime",
    "strictatime",
    "diratime",
    "nodiratime",
    "lazytime",
    "default_permissions",
];

fn is_ignored(opt: &str) -> bool {
    let name = opt.split('=').next().unwrap_or(opt);
    IGNORED.contains(&opt)
        || opt.starts_with("x-")
        || ["comment", "fsname", "subtype"].contains(&name)
}

/// The kernel mount options among `-o` (the others became flags already).
pub fn kernel_options(a: &MountArgs) -> Vec<MountOption> {
    a.options
        .iter()
        .filter_map(|o| KERNEL.iter().find(|(n, _)| n == o).map(|(_, m)| m.clone()))
        .collect()
}

/// Rewrites the command line before clap sees it: the mount-helper form becomes
/// `udsfs mount --background ... MOUNTPOINT`, and each `-o` option that is one
/// of our flags becomes that flag in place (so later flags still win). `cli`
/// is the clap definition (`cli::command`).
pub fn expand_argv(argv: Vec<OsString>, cli: &clap::Command) -> Result<Vec<OsString>, String> {
    let argv = helper_form(argv, cli);
    if argv.get(1).and_then(|a| a.to_str()) != Some("mount") {
        return Ok(argv);
    }
    let mount = cli
        .find_subcommand("mount")
        .cloned()
        .expect("mount subcommand");
    let mut out: Vec<OsString> = argv[..2].to_vec();
    let mut rest = argv[2..].iter();
    while let Some(arg) = rest.next() {
        let list = match arg.to_str() {
            Some("--") => {
                out.push(arg.clone());
                out.extend(rest.by_ref().cloned());
                break;
            }
            Some("-o") => match rest.next() {
                Some(v) => v.to_string_lossy().into_owned(),
                None => return Err("-o needs a list of options".into()),
            },
            Some(s) if s.starts_with("-o") => s[2..].to_owned(),
            _ => {
                out.push(arg.clone());
                continue;
            }
        };
        for opt in list.split(',').filter(|o| !o.is_empty()) {
            if KERNEL.iter().any(|(n, _)| *n == opt) || is_ignored(opt) {
                out.push(format!("-o{opt}").into());
            } else {
                out.push(as_flag(&mount, opt)?.into());
            }
        }
    }
    Ok(out)
}

/// `name=value` as `--name=value`, if `name` is one of mount's long options.
fn as_flag(mount: &clap::Command, opt: &str) -> Result<String, String> {
    let (name, value) = match opt.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (opt, None),
    };
    let long = name.replace('_', "-");
    let arg = mount
        .get_arguments()
        .find(|a| a.get_long() == Some(long.as_str()) && a.get_id() != "options")
        .ok_or_else(|| {
            format!(
                "unknown mount option '{name}'; udsfs takes {} and the standard ones \
                 (rw, ro, nosuid, nodev, noexec, noatime, _netdev, defaults, ...)",
                known(mount)
            )
        })?;
    let is_flag = matches!(arg.get_action(), ArgAction::SetTrue);
    match (is_flag, value) {
        (true, None) => Ok(format!("--{long}")),
        (true, Some(_)) => Err(format!("mount option '{name}' takes no value")),
        (false, Some(v)) if !v.is_empty() => Ok(format!("--{long}={v}")),
        (false, _) => Err(format!("mount option '{name}' needs a value: {name}=VALUE")),
    }
}

/// Our options in their `-o` spelling, for messages.
fn known(mount: &clap::Command) -> String {
    let names: Vec<String> = mount
        .get_arguments()
        .filter(|a| a.get_id() != "options" && a.get_id() != "help" && !a.is_hide_set())
        .filter_map(|a| {
            let long = a.get_long()?.replace('-', "_");
            Some(match a.get_value_names() {
                _ if matches!(a.get_action(), ArgAction::SetTrue) => long,
                Some([v, ..]) if v.as_str() == "PATH" => format!("{long}=PATH"),
                _ => format!("{long}=N"),
            })
        })
        .collect();
    names.join(", ")
}

/// `udsfs SOURCE MOUNTPOINT [-o OPTS] [-f]` (mount.fuse3 runs us so) becomes
/// `udsfs mount [--background] [-o OPTS] MOUNTPOINT`: a helper must return
/// once the mount is up, unless `-f` keeps it in the foreground.
fn helper_form(argv: Vec<OsString>, cli: &clap::Command) -> Vec<OsString> {
    let is_helper = argv.len() >= 3
        && argv[1]
            .to_str()
            .is_none_or(|a| !a.starts_with('-') && cli.find_subcommand(a).is_none() && a != "help");
    if !is_helper {
        return argv;
    }
    let mut out = vec![argv[0].clone(), "mount".into(), "--helper".into()];
    let rest = &argv[3..];
    if !rest.iter().any(|a| a == "-f") {
        out.push("--background".into());
    }
    out.extend(rest.iter().filter(|a| *a != "-f").cloned());
    out.push(argv[2].clone());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(args: &[&str]) -> Result<Vec<String>, String> {
        let argv = args.iter().map(OsString::from).collect();
        expand_argv(argv, &crate::cli::command()).map(|v| {
            v.into_iter()
                .map(|a| a.into_string().unwrap())
                .collect::<Vec<_>>()
        })
    }

    #[test]
    fn helper_form_becomes_background_mount() {
        let got = expand(&[
            "udsfs",
            "udsfs",
            "/mnt",
            "-o",
            "rw,nosuid,allow_other,threads=4,max_dgram_qlen=5,_netdev",
        ])
        .unwrap();
        let want = [
            "udsfs",
            "mount",
            "--helper",
            "--background",
            "-orw",
            "-onosuid",
            "--allow-other",
            "--threads=4",
            "--max-dgram-qlen=5",
            "-o_netdev",
            "/mnt",
        ];
        assert_eq!(got, want);
        let fg = expand(&["udsfs", "src", "/mnt", "-f"]).unwrap();
        assert_eq!(fg, ["udsfs", "mount", "--helper", "/mnt"]);
    }

    #[test]
    fn every_flag_has_an_o_spelling() {
        let mount = crate::cli::command()
            .find_subcommand("mount")
            .unwrap()
            .clone();
        for a in mount.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            if long == "help" {
                continue;
            }
            let opt = long.replace('-', "_");
            let opt = if matches!(a.get_action(), ArgAction::SetTrue) {
                opt
            } else {
                format!("{opt}=7")
            };
            let got = expand(&["udsfs", "mount", "-o", &opt, "/m"]).unwrap();
            assert!(got[2].starts_with(&format!("--{long}")), "{opt}: {got:?}");
        }
    }

    #[test]
    fn unknown_and_malformed_options_are_refused() {
        let e = expand(&["udsfs", "mount", "-o", "threads=2,bogus=1", "/m"]).unwrap_err();
        assert!(e.contains("unknown mount option 'bogus'"), "{e}");
        assert!(e.contains("max_dgram_qlen=N"), "{e}");
        let e = expand(&["udsfs", "mount", "-o", "threads", "/m"]).unwrap_err();
        assert!(e.contains("needs a value"), "{e}");
        let e = expand(&["udsfs", "mount", "-oallow_other=1", "/m"]).unwrap_err();
        assert!(e.contains("takes no value"), "{e}");
    }

    #[test]
    fn subcommands_are_not_the_helper_form() {
        let got = expand(&["udsfs", "umount", "/m"]).unwrap();
        assert_eq!(got, ["udsfs", "umount", "/m"]);
        let got = expand(&["udsfs", "ss", "-l"]).unwrap();
        assert_eq!(got, ["udsfs", "ss", "-l"]);
    }
}
