//! The command line: one file per subcommand, the clap root and dispatch here.

pub mod capture;
mod devfuse;
mod fault;
mod graph;
mod man;
mod mount;
mod mounts;
mod options;
mod procfd;
mod ss;
mod umount;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "udsfs",
    version,
    about = "Linux AF_UNIX sockets as a FUSE filesystem",
    after_help = "As a mount helper (mount -t fuse.udsfs, /etc/fstab): \
                  udsfs SOURCE MOUNTPOINT [-o OPTIONS] [-f]"
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Mount udsfs (foreground unless --background).
    #[command(
        args_override_self = true,
        after_long_help = "Also mounted by mount(8) through mount.fuse3(8), which runs \
            `udsfs SOURCE MOUNTPOINT -o OPTIONS` (in the background once the mount answers):\n\n  \
            mount -t fuse.udsfs udsfs /run/udsfs -o allow_other,threads=4\n  \
            # /etc/fstab:\n  \
            udsfs  /run/udsfs  fuse.udsfs  allow_other,max_dgram_qlen=64,_netdev  0 0\n\n\
            A mount point udsfs already serves is refused (the message names its daemon); \
            a stale one (its daemon killed: ENOTCONN) is cleared first."
    )]
    Mount(options::MountArgs),
    /// Unmount a udsfs mount and stop its daemon.
    Umount { mountpoint: PathBuf },
    /// List the sockets of a mount, like `ss -x`.
    Ss(ss::SsArgs),
    /// Print the sockets, connections and sockets in flight as Graphviz DOT.
    Graph(graph::GraphArgs),
    /// Capture a mount's messages as pcapng (for Wireshark and tshark).
    Capture(capture::CaptureArgs),
    /// Print the man page (roff) of udsfs or of one subcommand.
    Man(man::ManArgs),
    /// Print a shell completion script.
    Completions(man::CompletionsArgs),
    /// Run a program with its AF_UNIX sockets on udsfs (the preload library).
    Run(crate::run::RunArgs),
    /// Add, list and delete fault rules (.udsfs/faults): delay, cut, refuse messages.
    Fault(fault::FaultArgs),
}

pub fn main() -> i32 {
    let argv = match options::expand_argv(std::env::args_os().collect(), &command()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("udsfs: {e}");
            return 1;
        }
    };
    let cli = Cli::parse_from(&argv);
    let (name, res) = match cli.cmd {
        Cmd::Mount(a) => return mount::main(&a, &argv),
        Cmd::Run(a) => return crate::run::main(a),
        Cmd::Umount { mountpoint } => ("umount", umount::umount(&mountpoint)),
        Cmd::Ss(a) => ("ss", ss::main(&a)),
        Cmd::Graph(a) => ("graph", graph::main(&a)),
        Cmd::Capture(a) => ("capture", capture::main(&a)),
        Cmd::Man(a) => ("man", man::man(&a, command())),
        Cmd::Completions(a) => ("completions", man::completions(&a, command())),
        Cmd::Fault(a) => ("fault", fault::main(&a)),
    };
    match res {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("udsfs {name}: {e}");
            1
        }
    }
}

/// The clap definition, for the help of `-o` checks and the generators.
fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}
