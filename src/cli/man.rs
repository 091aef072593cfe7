//! Man pages and shell completions, generated from the clap definitions.

use std::path::PathBuf;

use clap::Args;
use clap_complete::Shell;

#[derive(Args)]
pub struct ManArgs {
    /// The page of this subcommand (udsfs-mount(1), ...); none: udsfs(1).
    subcommand: Option<String>,
    /// Write every page (udsfs.1, udsfs-mount.1, ...) into DIR instead.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

/// The pages of `cmd`, the clap definition (`cli::command`).
pub fn man(a: &ManArgs, cmd: clap::Command) -> Result<(), String> {
    if let Some(dir) = &a.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        return clap_mangen::generate_to(cmd, dir).map_err(|e| format!("{}: {e}", dir.display()));
    }
    let page = match &a.subcommand {
        None => cmd,
        Some(name) => {
            let mut cmd = cmd;
            // Subcommands' pages are named udsfs-NAME, as generate_to names them.
            cmd.build();
            cmd.find_subcommand(name)
                .cloned()
                .ok_or_else(|| format!("no subcommand '{name}'"))?
                .name(format!("udsfs-{name}"))
                .version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut text = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut text)
        .map_err(|e| e.to_string())?;
    print_all(&text)
}

/// The completions of `cmd`, the clap definition (`cli::command`).
pub fn completions(a: &CompletionsArgs, mut cmd: clap::Command) -> Result<(), String> {
    let mut text = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "udsfs", &mut text);
    print_all(&text)
}

/// Writes `text` to standard output. A reader that went away early
/// (`udsfs completions bash | grep -q ...`) ends the output quietly, as a
/// command killed by SIGPIPE would; clap's writers panic on it instead.
fn print_all(text: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
        _ => Ok(()),
    }
}
