//! `udsfs ss`: the sockets of a mount in the layout of `ss -x`, from
//! `.udsfs/unix` and each socket's status file, with ss's `-l -a -e -p -n`
//! and its `state` / `src` / `dst` filters.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use clap::Args;

use super::procfd;

#[derive(Args)]
pub struct SsArgs {
    /// Listening sockets only (and unconnected ones, as ss -l shows them).
    #[arg(short = 'l', long)]
    listening: bool,
    /// All sockets: listening, connected and unconnected.
    #[arg(short = 'a', long)]
    all: bool,
    /// Extra fields: the node's inode and device, pending peers, refs, passcred, peercred.
    #[arg(short = 'e', long)]
    extended: bool,
    /// Processes holding the socket's files: name, pid, fd.
    #[arg(short = 'p', long)]
    processes: bool,
    /// Numeric output (accepted for ss's sake: nothing here is resolved).
    #[arg(short = 'n', long)]
    numeric: bool,
    /// Unix sockets (the only kind udsfs has; accepted for ss's sake).
    #[arg(short = 'x', long)]
    unix: bool,
    /// [MOUNTPOINT] then a filter as ss takes it: `state S` (established,
    /// listening, closed, connected, all; repeatable), `exclude S`, `src PATTERN`,
    /// `dst PATTERN` (shell wildcards; `@name` for abstract names).
    #[arg(value_name = "MOUNTPOINT|FILTER", trailing_var_arg = true)]
    words: Vec<String>,
}

/// One socket, as read from the mount.
struct Row {
    id: u64,
    netid: &'static str,
    state: &'static str,
    recvq: String,
    sendq: String,
    local: String,
    peer_name: String,
    peer_id: String,
    status: HashMap<String, String>,
}

const KEYWORDS: [&str; 6] = ["state", "exclude", "src", "dst", "and", "or"];

#[derive(Default)]
struct Filter {
    states: Vec<&'static str>,
    /// One `state` word naming one state: ss then leaves out the State column.
    one_state: bool,
    excluded: Vec<&'static str>,
    src: Vec<String>,
    dst: Vec<String>,
}

/// ss's state names, as the states this table prints.
fn states_named(name: &str) -> Result<Vec<&'static str>, String> {
    Ok(match name {
        "established" | "connected" | "synchronized" => vec!["ESTAB"],
        "listening" | "listen" => vec!["LISTEN"],
        "closed" | "close" | "unconnected" => vec!["UNCONN"],
        "all" => vec!["ESTAB", "LISTEN", "UNCONN"],
        _ => return Err(format!("unknown state '{name}'")),
    })
}

fn parse_words(words: &[String]) -> Result<(PathBuf, Filter), String> {
    let mut it = words.iter().peekable();
    let mount = match it.peek() {
        Some(w) if !KEYWORDS.contains(&w.as_str()) => PathBuf::from(it.next().unwrap()),
        _ => PathBuf::from("mountpoints/default"),
    };
    let mut f = Filter::default();
    let mut state_words = Vec::new();
    while let Some(w) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("'{w}' needs a value"))
        };
        match w.as_str() {
            "state" => {
                let v = value()?;
                f.states.extend(states_named(&v)?);
                state_words.push(v);
            }
            "exclude" => f.excluded.extend(states_named(&value()?)?),
            "src" => f.src.push(value()?),
            "dst" => f.dst.push(value()?),
            "and" => {}
            _ => {
                return Err(format!(
                    "unknown filter word '{w}' (state, exclude, src, dst)"
                ));
            }
        }
    }
    f.one_state = matches!(
        state_words.as_slice(),
        [w] if ["established", "listening", "listen", "closed", "close"].contains(&w.as_str())
    );
    Ok((mount, f))
}

pub fn main(a: &SsArgs) -> Result<(), String> {
    let (mount, filter) = parse_words(&a.words)?;
    let mount = std::fs::canonicalize(&mount).map_err(|e| format!("{}: {e}", mount.display()))?;
    print!("{}", table(a, &mount, &filter)?);
    Ok(())
}

fn read_rows(mount: &Path) -> Result<Vec<Row>, String> {
    let unix = std::fs::read_to_string(mount.join(".udsfs/unix"))
        .map_err(|e| format!("{}: not a udsfs mount? {e}", mount.display()))?;
    let mut rows = Vec::new();
    for line in unix.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(st), Some(id)) = (f.get(5), f.get(6).and_then(|i| i.parse::<u64>().ok())) else {
            continue;
        };
        // Embryos (St 02, no inode) wait in their listener; ss does not list them.
        if *st == "02" || id == 0 {
            continue;
        }
        let netid = match f.get(4).copied() {
            Some("0001") => "u_str",
            Some("0002") => "u_dgr",
            Some("0005") => "u_seq",
            _ => "?",
        };
        let text = std::fs::read_to_string(mount.join(format!(".udsfs/sock/{id}/status")))
            .unwrap_or_default();
        let status: HashMap<String, String> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let get = |k: &str| status.get(k).cloned().unwrap_or_else(|| "-".into());
        // Another user's status is not readable: .udsfs/unix still gives
        // the state and name, as /proc/net/unix does to any user.
        let state = match status.get("state").map(String::as_str) {
            Some("listening") => "LISTEN",
            Some("connected") => "ESTAB",
            None if f.get(3) == Some(&"00010000") => "LISTEN",
            None if *st == "03" => "ESTAB",
            _ => "UNCONN",
        };
        let (recvq, sendq) = match state {
            "LISTEN" => (get("pending"), get("backlog")),
            _ if netid == "u_dgr" => (get("rcvq_head"), get("wmem")),
            _ => (get("rcvq_bytes"), get("wmem")),
        };
        let local = match status.get("local") {
            Some(l) => l.clone(),
            None => f.get(7..).map(|p| p.join(" ")).unwrap_or_default(),
        };
        rows.push(Row {
            id,
            netid,
            state,
            recvq,
            sendq,
            local: if local.is_empty() { "*".into() } else { local },
            peer_name: get("peer"),
            peer_id: status.get("peer_id").cloned().unwrap_or_else(|| "0".into()),
            status,
        });
    }
    // Linux marks a dgram socket established when another connects to it
    // (and leaves it so); here: while one is connected to it.
    let targets: std::collections::HashSet<String> =
        rows.iter().map(|r| r.peer_id.clone()).collect();
    for r in rows.iter_mut() {
        if r.netid == "u_dgr" && r.state == "UNCONN" && targets.contains(&r.id.to_string()) {
            r.state = "ESTAB";
        }
    }
    Ok(rows)
}

/// A pattern (shell wildcards `*` and `?`, as ss matches unix addresses)
/// matches a name as bound or as its absolute path in the mount.
fn matches(pats: &[String], name: &str, mount: &Path) -> bool {
    let glob = crate::wildcard::matches_bytes;
    let abs = mount.join(name);
    let abs = abs.to_string_lossy();
    pats.is_empty()
        || pats.iter().any(|p| {
            glob(p.as_bytes(), name.as_bytes())
                || (!name.starts_with('@') && glob(p.as_bytes(), abs.as_bytes()))
        })
}

fn selected(a: &SsArgs, f: &Filter, mount: &Path, r: &Row) -> bool {
    let state_ok = if !f.states.is_empty() {
        f.states.contains(&r.state)
    } else if a.all {
        true
    } else if a.listening {
        // ss -l: listening and closed (unconnected) sockets.
        r.state != "ESTAB"
    } else {
        // ss's default: neither listening nor closed.
        r.state == "ESTAB"
    };
    state_ok
        && !f.excluded.contains(&r.state)
        && matches(&f.src, &r.local, mount)
        && (f.dst.is_empty() || matches(&f.dst, &r.peer_name, mount))
}

/// ss -e's tail: `<->`, the node's inode and device for a path name,
/// a listener's waiting clients, then what udsfs adds.
fn extended(mount: &Path, r: &Row) -> String {
    let mut out = String::from("<->");
    if r.local != "*" && !r.local.starts_with('@') {
        let path = if r.local.starts_with('/') {
            PathBuf::from(&r.local)
        } else {
            mount.join(&r.local)
        };
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            let dev = m.dev();
            let (maj, min) = (libc::major(dev), libc::minor(dev));
            out.push_str(&format!(" ino:{} dev:{maj}/{min}", m.ino()));
        }
    }
    if let Some(p) = r.status.get("pending_peers").filter(|p| !p.is_empty()) {
        out.push_str(" peers:");
        for id in p.split(',') {
            out.push_str(&format!(" {id}"));
        }
    }
    let get = |k: &str| r.status.get(k).map(String::as_str).unwrap_or("-");
    out.push_str(&format!(
        " refs:{} passcred:{}",
        get("refs"),
        get("passcred")
    ));
    if let Some(c) = r.status.get("peercred").filter(|c| !c.is_empty()) {
        out.push_str(&format!(" peercred:{c}"));
    }
    out
}

fn table(a: &SsArgs, mount: &Path, f: &Filter) -> Result<String, String> {
    let rows: Vec<Row> = read_rows(mount)?
        .into_iter()
        .filter(|r| selected(a, f, mount, r))
        .collect();
    let holders = if a.processes {
        procfd::holders(mount)
    } else {
        HashMap::new()
    };
    let mut cells: Vec<Vec<String>> = vec![vec![
        "Netid".into(),
        "State".into(),
        "Recv-Q".into(),
        "Send-Q".into(),
        "Local Address".into(),
        "Port".into(),
        "Peer Address".into(),
        "Port".into(),
        "Process".into(),
    ]];
    for r in &rows {
        let mut process = holders
            .get(&r.id)
            .map(|h| procfd::users_column(h))
            .unwrap_or_default();
        if a.extended {
            process = format!("{process} {}", extended(mount, r));
        }
        cells.push(vec![
            r.netid.into(),
            r.state.into(),
            r.recvq.clone(),
            r.sendq.clone(),
            r.local.clone(),
            r.id.to_string(),
            // ss prints the peer's inode only, not its name.
            "*".into(),
            r.peer_id.clone(),
            process,
        ]);
    }
    let width = |c: usize| cells.iter().map(|r| r[c].len()).max().unwrap_or(0);
    let w: Vec<usize> = (0..8).map(width).collect();
    let mut out = String::new();
    for (i, r) in cells.iter().enumerate() {
        let sep = if i == 0 { ":" } else { " " };
        let mut line = String::new();
        line.push_str(&format!("{:<w0$} ", r[0], w0 = w[0]));
        if !f.one_state {
            line.push_str(&format!("{:<w1$} ", r[1], w1 = w[1]));
        }
        line.push_str(&format!(
            "{:<w2$} {:<w3$} {:>w4$}{sep}{:<w5$} {:>w6$}{sep}{:<w7$} {}",
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            r[8],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5],
            w6 = w[6],
            w7 = w[7],
        ));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_filter_words() {
        // The wildcards are wildcard.rs's (tested there); here, which names
        // a pattern is tried on.
        let pat = |p: &str| vec![p.to_string()];
        let mount = Path::new("/m");
        assert!(matches(&pat("@abs*"), "@abs name", mount));
        assert!(matches(&pat("/m/run/?.sock"), "run/a.sock", mount));
        assert!(matches(&pat("run/?.sock"), "run/a.sock", mount));
        assert!(!matches(&pat("/m/run/?.sock"), "run/ab.sock", mount));
        assert!(
            !matches(&pat("/m/@abs"), "@abs", mount),
            "no path for an abstract name"
        );
        assert!(matches(&[], "anything", mount));
        let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let (m, f) = parse_words(&w("/mnt state listening src /mnt/*.sock")).unwrap();
        assert_eq!(m, PathBuf::from("/mnt"));
        assert_eq!(f.states, vec!["LISTEN"]);
        assert_eq!(f.src, vec!["/mnt/*.sock".to_string()]);
        let (m, f) = parse_words(&w("state connected")).unwrap();
        assert_eq!(m, PathBuf::from("mountpoints/default"));
        assert_eq!(f.states, vec!["ESTAB"]);
        assert!(parse_words(&w("/m state bogus")).is_err());
        assert!(parse_words(&w("/m src")).is_err());
    }
}
