//! `udsfs graph`: the daemon's socket graph (`.udsfs/graph`) as Graphviz DOT.

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
pub struct GraphArgs {
    /// The mount.
    #[arg(default_value = "mountpoints/default")]
    mountpoint: PathBuf,
}

pub fn main(a: &GraphArgs) -> Result<(), String> {
    let dot = std::fs::read_to_string(a.mountpoint.join(".udsfs/graph"))
        .map_err(|e| format!("{}: not a udsfs mount? {e}", a.mountpoint.display()))?;
    print!("{dot}");
    Ok(())
}
