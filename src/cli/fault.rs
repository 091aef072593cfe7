//! `udsfs fault`: add, list and delete fault rules through a mount's
//! `.udsfs/faults` (its format is `crate::fault::Command` and the listing
//! line there).

use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::fault::{Command, FAULTS_FILE, ListingLine, Rule, RuleRef, parse_listing_line};

const DEFAULT_MOUNT: &str = "mountpoints/default";

/// The words that begin a rule: a first word that is not one names the mount.
const SELECTORS: [&str; 4] = ["socket", "name", "pid", "uid"];

#[derive(Args)]
pub struct FaultArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Add a rule and print its number (each user numbers their own rules).
    ///
    /// [MOUNT] SELECTOR [up|down] FAULT [KEY=VALUE...], e.g.
    /// `udsfs fault add /mnt name run/db.sock down latency latency=100 jitter=10`.
    /// Selectors: socket N, name GLOB, pid P, uid U. docs/faults.md lists the
    /// faults and their parameters.
    Add {
        #[arg(value_name = "MOUNT|RULE", trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
    /// List the rules: number, matched, injected, rule. Another user's rule
    /// (root's, or any to root) shows as OWNER:N; the counters count only
    /// messages you may see (of root's rules: the ones you made).
    List {
        #[arg(default_value = DEFAULT_MOUNT)]
        mountpoint: PathBuf,
    },
    /// Delete rules by number.
    ///
    /// [MOUNT] ID...: N is your rule N, OWNER:N user OWNER's (root may).
    Del {
        #[arg(value_name = "MOUNT|ID", required = true)]
        words: Vec<String>,
    },
    /// Delete every rule (yours, or all when root).
    Clear {
        #[arg(default_value = DEFAULT_MOUNT)]
        mountpoint: PathBuf,
    },
}

pub fn main(a: &FaultArgs) -> Result<(), String> {
    match &a.action {
        Action::Add { words } => {
            let (mount, rule) = split_mount(words, |w| SELECTORS.contains(&w));
            let rule = Rule::parse(&rule.join(" "))?;
            match add(&mount, &rule)? {
                Some(id) => println!("{id}"),
                None => println!("added"),
            }
            Ok(())
        }
        Action::List { mountpoint } => {
            let rules = list(mountpoint)?;
            println!("{:>4}  {:>9}  {:>9}  RULE", "ID", "MATCHED", "INJECTED");
            for l in rules {
                println!(
                    "{:>4}  {:>9}  {:>9}  {}",
                    l.id.to_string(),
                    l.matched,
                    l.injected,
                    l.rule
                );
            }
            Ok(())
        }
        Action::Del { words } => {
            let (mount, ids) = split_mount(words, |w| w.parse::<RuleRef>().is_ok());
            if ids.is_empty() {
                return Err("del: which rule? (a number from `udsfs fault list`)".into());
            }
            for id in ids {
                let id: RuleRef = id
                    .parse()
                    .map_err(|_| format!("del: not a rule number (N or OWNER:N): '{id}'"))?;
                write_command(&mount, &Command::Del(id)).map_err(|e| match e.kind() {
                    ErrorKind::NotFound => format!("del: no rule {id}"),
                    ErrorKind::PermissionDenied => format!("del: rule {id} is not yours"),
                    _ => format!("del {id}: {e}"),
                })?;
            }
            Ok(())
        }
        Action::Clear { mountpoint } => write_command(mountpoint, &Command::Clear)
            .map_err(|e| format!("{}: {e}", faults_file(mountpoint).display())),
    }
}

/// Takes the first word as the mount unless it could begin what follows.
fn split_mount(words: &[String], begins: impl Fn(&str) -> bool) -> (PathBuf, &[String]) {
    match words.split_first() {
        Some((first, rest)) if !begins(first) => (PathBuf::from(first), rest),
        _ => (PathBuf::from(DEFAULT_MOUNT), words),
    }
}

fn faults_file(mount: &Path) -> PathBuf {
    mount.join(FAULTS_FILE)
}

/// One command, one write: the file acts on each write as a whole.
fn write_command(mount: &Path, cmd: &Command) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(faults_file(mount))?;
    f.write_all(cmd.line().as_bytes())
}

/// Adds `rule`; its number is the newest of the writer's own listed rules
/// that reads as it.
fn add(mount: &Path, rule: &Rule) -> Result<Option<u64>, String> {
    let file = faults_file(mount);
    write_command(mount, &Command::Add(rule.clone())).map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            // The rule parsed here: the daemon found it does not fit.
            format!(
                "{}: the daemon refused the rule (EINVAL; its log says why)",
                file.display()
            )
        } else {
            not_a_mount(mount, &file, e)
        }
    })?;
    let text = read(mount)?;
    Ok(text
        .lines()
        .filter_map(|l| parse_listing_line(l).ok())
        .filter(|l| l.id.owner.is_none() && l.rule == *rule)
        .map(|l| l.id.n)
        .max())
}

fn read(mount: &Path) -> Result<String, String> {
    let file = faults_file(mount);
    let mut text = String::new();
    std::fs::File::open(&file)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|e| not_a_mount(mount, &file, e))?;
    Ok(text)
}

fn list(mount: &Path) -> Result<Vec<ListingLine>, String> {
    read(mount)?
        .lines()
        .filter(|l| !l.is_empty())
        .map(parse_listing_line)
        .collect()
}

fn not_a_mount(mount: &Path, file: &Path, e: std::io::Error) -> String {
    if e.kind() == ErrorKind::NotFound && mount.join(".udsfs").is_dir() {
        format!("{}: {e} (this udsfs serves no fault rules)", file.display())
    } else if e.kind() == ErrorKind::NotFound {
        format!("{}: not a udsfs mount? {e}", mount.display())
    } else {
        format!("{}: {e}", file.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_mount_is_the_first_word_when_no_rule_begins_there() {
        let w = words("/mnt/u name run/db.sock full");
        let (m, rest) = split_mount(&w, |w| SELECTORS.contains(&w));
        assert_eq!(
            (m, rest.join(" ")),
            ("/mnt/u".into(), "name run/db.sock full".into())
        );
        let w = words("socket 3 full");
        let (m, rest) = split_mount(&w, |w| SELECTORS.contains(&w));
        assert_eq!((m, rest.len()), (DEFAULT_MOUNT.into(), 3));
        let w = words("7 0:3");
        let (m, rest) = split_mount(&w, |w| w.parse::<RuleRef>().is_ok());
        assert_eq!((m, rest.len()), (DEFAULT_MOUNT.into(), 2));
    }

    /// A directory standing in for a mount, its faults file a plain file.
    fn fake_mount(listing: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".udsfs")).unwrap();
        std::fs::write(dir.path().join(FAULTS_FILE), listing).unwrap();
        dir
    }

    #[test]
    fn list_reads_the_listing_format() {
        let m = fake_mount(
            "1\tsocket 12 full\tmatched=3 injected=2\n\
             0:4\tname @bus up refuse errno=EAGAIN\tmatched=0 injected=0\n",
        );
        let l = list(m.path()).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].id.to_string(), l[0].matched, l[0].injected),
            ("1".into(), 3, 2)
        );
        assert_eq!(l[1].id.to_string(), "0:4");
        assert_eq!(l[1].rule.to_string(), "name @bus up refuse errno=EAGAIN");
        let bad = fake_mount("1 socket 12 full\n");
        assert!(list(bad.path()).is_err());
    }

    #[test]
    fn add_writes_the_canonical_line_once() {
        let m = fake_mount("");
        let rule = Rule::parse("socket 12 slicer average_size=64").unwrap();
        // A plain file keeps what was written, which is no listing: no number.
        assert_eq!(add(m.path(), &rule), Ok(None));
        assert_eq!(
            std::fs::read_to_string(m.path().join(FAULTS_FILE)).unwrap(),
            "socket 12 slicer average_size=64 size_variation=0 delay=0\n"
        );
    }

    #[test]
    fn a_directory_without_the_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = list(dir.path()).unwrap_err();
        assert!(e.contains("not a udsfs mount?"), "{e}");
        std::fs::create_dir(dir.path().join(".udsfs")).unwrap();
        let e = list(dir.path()).unwrap_err();
        assert!(e.contains("serves no fault rules"), "{e}");
    }
}
