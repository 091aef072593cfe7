//! Directory listings of the tree and of the control tree.
//!
//! A listing is read in chunks, each resuming at a cookie. Cookies are
//! stable while the directory changes: a tree directory's chunk resumes
//! after the name its cookie stands for (kept per open directory), and
//! `.udsfs/sock` and `.udsfs/abstract` resume after a socket number or
//! generation; so no entry is skipped or repeated, and no chunk rebuilds
//! the whole tree directory.

use std::collections::HashMap;

use fuser::FileType;
use nix::errno::Errno;
use parking_lot::Mutex;

use super::dir_cursor::{DirCursor, DirEntry};
use super::files::{FileKind, OpenFile};
use super::front::Inner;
use super::inode::{Ctrl, Node, SockFile, TYPE_NAMES};
use crate::engine::Caller;
use crate::engine::tree::{self, Kind, ROOT_INO};
use udsfs_proto::addr;

const DOT: u64 = 1;
const DOTDOT: u64 = 2;
/// The first cookie of a named entry.
const FIRST: u64 = 3;
/// The cookie of `.udsfs`, last in the root.
const CONTROL: u64 = u64::MAX - 1;
/// Tree entries fetched per chunk: the most one reply takes (REPLY_BYTES
/// of dirents of 32 bytes at least).
const CHUNK: usize = REPLY_BYTES / 32;
/// What the kernel's buffer for one readdir reply holds (FUSE asks with
/// one page); a tree chunk hands out no more entries than fit in it.
const REPLY_BYTES: usize = 4096;

/// The room a name takes in a reply: a struct fuse_dirent (24 bytes and
/// the name, padded to 8).
fn dirent_size(name: &[u8]) -> usize {
    (24 + name.len()).next_multiple_of(8)
}

/// An abstract name as `.udsfs/abstract` lists it: escaped as addresses
/// are shown, and also '/' and a name that is `.` or `..` as \xHH, which
/// a lookup takes back. None when no directory entry can hold it (the empty
/// name, more than NAME_MAX bytes): a reply with such an entry fails the
/// whole listing with EIO, for every user.
fn listed_name(name: &[u8]) -> Option<Vec<u8>> {
    let shown = match name {
        b"." => "\\x2e".to_string(),
        b".." => "\\x2e\\x2e".to_string(),
        _ => addr::escape(name).replace('/', "\\x2f"),
    };
    (!shown.is_empty() && shown.len() <= 255).then(|| shown.into_bytes())
}

/// Sockets one chunk of `.udsfs/sock` looks for: a reply takes some 128.
const SOCK_CHUNK: usize = 160;

/// A control directory's entry before its cookie: (inode, type, name).
type Listed = (u64, FileType, Vec<u8>);

/// `.` (directory `me`) and `..` (`up`), those of them after cookie `offset`.
fn dots_after(me: u64, up: u64, offset: u64) -> Vec<DirEntry> {
    [(DOT, me, &b"."[..]), (DOTDOT, up, &b".."[..])]
        .into_iter()
        .filter(|&(cookie, _, _)| cookie > offset)
        .map(|(cookie, ino, name)| DirEntry::new(ino, cookie, FileType::Directory, name))
        .collect()
}

impl Inner {
    /// opendir: tree directories get a cursor; the control tree's need none.
    pub(super) fn opendir(&self, ino: u64) -> u64 {
        match Node::from_ino(ino) {
            Some(Node::Tree(_) | Node::Connect(_) | Node::Ctrl(Ctrl::AbstractDir)) => {
                self.files.insert(OpenFile::new(
                    None,
                    FileKind::Dir(Mutex::new(DirCursor::default())),
                ))
            }
            _ => 0,
        }
    }

    /// The entries of a control directory, each with its cookie.
    fn control_entries(&self, node: Node, c: &Caller) -> Result<Vec<DirEntry>, Errno> {
        let dir = FileType::Directory;
        let reg = FileType::RegularFile;
        let numbered = |v: Vec<Listed>| -> Vec<DirEntry> {
            v.into_iter()
                .enumerate()
                .map(|(i, (ino, kind, name))| DirEntry {
                    ino,
                    cookie: i as u64 + 1,
                    kind,
                    name,
                })
                .collect()
        };
        Ok(match node {
            Node::Ctrl(Ctrl::Root) => {
                let mut out = vec![
                    (node.ino(), dir, b".".to_vec()),
                    (ROOT_INO, dir, b"..".to_vec()),
                ];
                for (t, n) in TYPE_NAMES {
                    let ino = Node::Ctrl(Ctrl::TypeDir(t)).ino();
                    out.push((ino, dir, n.as_bytes().to_vec()));
                }
                out.push((Node::Ctrl(Ctrl::SockDir).ino(), dir, b"sock".to_vec()));
                let abs = Node::Ctrl(Ctrl::AbstractDir).ino();
                out.push((abs, dir, b"abstract".to_vec()));
                out.push((Node::Connect(ROOT_INO).ino(), dir, b"connect".to_vec()));
                out.push((Node::Ctrl(Ctrl::Unix).ino(), reg, b"unix".to_vec()));
                out.push((Node::Ctrl(Ctrl::Graph).ino(), reg, b"graph".to_vec()));
                let cap = Node::Ctrl(Ctrl::Capture).ino();
                out.push((cap, reg, b"capture".to_vec()));
                out.push((Node::Ctrl(Ctrl::Gc).ino(), reg, b"gc".to_vec()));
                let faults = Node::Ctrl(Ctrl::Faults).ino();
                out.push((faults, reg, b"faults".to_vec()));
                let fdc = Node::Ctrl(Ctrl::FdChannel).ino();
                out.push((fdc, reg, b"fdchannel".to_vec()));
                let acc = Node::Ctrl(Ctrl::AcceptDir).ino();
                out.push((acc, dir, b"accept".to_vec()));
                numbered(out)
            }
            // Tickets are not listed: each name is its holder's secret.
            Node::Ctrl(Ctrl::AcceptDir) => numbered(vec![
                (node.ino(), dir, b".".to_vec()),
                (Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()),
            ]),
            Node::Ctrl(Ctrl::TypeDir(t)) => numbered(vec![
                (node.ino(), dir, b".".to_vec()),
                (Node::Ctrl(Ctrl::Root).ino(), dir, b"..".to_vec()),
                (Node::Ctrl(Ctrl::Clone(t)).ino(), reg, b"clone".to_vec()),
                (Node::Ctrl(Ctrl::Pair(t)).ino(), reg, b"pair".to_vec()),
            ]),
            Node::Sock(generation, SockFile::Dir) => {
                self.shown(node, c)?;
                let mut out = vec![
                    (node.ino(), dir, b".".to_vec()),
                    (Node::Ctrl(Ctrl::SockDir).ino(), dir, b"..".to_vec()),
                ];
                for (f, n) in SockFile::FILES {
                    out.push((Node::Sock(generation, f).ino(), reg, n.as_bytes().to_vec()));
                }
                numbered(out)
            }
            // One entry per name (shared by the three types), its cookie the
            // oldest generation bound to it.
            Node::Ctrl(Ctrl::AbstractDir) => {
                let mut out = dots_after(node.ino(), Node::Ctrl(Ctrl::Root).ino(), 0);
                let mut first: HashMap<Vec<u8>, u64> = HashMap::new();
                for (_, name, s) in self.eng.abstract_names(c.netns()) {
                    let Some(shown) = listed_name(&name) else {
                        log::info!(
                            "abstract name {} cannot be a directory entry: not listed",
                            addr::escape(&name)
                        );
                        continue;
                    };
                    let g = first.entry(shown).or_insert(s.generation);
                    *g = (*g).min(s.generation);
                }
                let mut names: Vec<_> = first.into_iter().collect();
                names.sort_unstable_by_key(|(_, g)| *g);
                for (shown, g) in names {
                    out.push(DirEntry {
                        ino: Node::Abstract(g).ino(),
                        cookie: g + FIRST,
                        kind: reg,
                        name: shown,
                    });
                }
                out
            }
            _ => return Err(Errno::ENOTDIR),
        })
    }

    /// The listing of directory `ino` after cookie `offset`, as far as
    /// this chunk goes (the kernel takes what fits and asks again from the
    /// last cookie it took).
    pub(super) fn readdir(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        c: &Caller,
    ) -> Result<Vec<DirEntry>, Errno> {
        let node = Node::from_ino(ino).ok_or(Errno::ENOENT)?;
        if let Node::Tree(dir) | Node::Connect(dir) = node {
            return self.tree_listing(node, dir, fh, offset);
        }
        if let Node::Ctrl(Ctrl::SockDir) = node {
            return Ok(self.sock_listing(node, offset, c));
        }
        if let Node::Ctrl(Ctrl::AbstractDir) = node
            && let Some(f) = self.files.get(fh)
            && let FileKind::Dir(cursor) = &f.kind
        {
            return self.kept_listing(node, &mut cursor.lock(), offset, c);
        }
        let mut entries = self.control_entries(node, c)?;
        entries.retain(|e| e.cookie > offset);
        Ok(entries)
    }

    /// A chunk of a control directory whose listing its open handle keeps
    /// (`.udsfs/abstract`): gathering and sorting every name costs what the
    /// names do, so it is done once per listing, not once per chunk. The
    /// kept entries count as an open listing's text (ENOMEM past the
    /// reader's share).
    fn kept_listing(
        &self,
        node: Node,
        cur: &mut DirCursor,
        offset: u64,
        c: &Caller,
    ) -> Result<Vec<DirEntry>, Errno> {
        if offset == 0 || cur.listed.is_none() {
            cur.listed = None;
            let entries = self.control_entries(node, c)?;
            let bytes: usize = entries
                .iter()
                .map(|e| std::mem::size_of::<DirEntry>() + e.name.len())
                .sum();
            let charge = self.charge_listing(bytes, c)?;
            cur.listed = Some((entries, charge));
        }
        let Some((entries, _)) = &cur.listed else {
            return Ok(Vec::new());
        };
        let from = entries.partition_point(|e| e.cookie <= offset);
        Ok(entries[from..].iter().take(CHUNK).cloned().collect())
    }

    /// A chunk of `.udsfs/sock`: socket numbers are the cookies, so a
    /// socket made or closed between chunks moves no other entry, and a
    /// chunk looks only at the sockets after its cookie. Only the
    /// directories the reader may see are listed (src/fuse/open.rs
    /// `visible`).
    fn sock_listing(&self, node: Node, offset: u64, c: &Caller) -> Vec<DirEntry> {
        let d = FileType::Directory;
        let mut out = dots_after(node.ino(), Node::Ctrl(Ctrl::Root).ino(), offset);
        let mut after = offset.saturating_sub(FIRST);
        while out.len() < SOCK_CHUNK {
            let batch = self.eng.dirs_after(after, SOCK_CHUNK, |dir| {
                self.visible(dir, c).then_some(dir.generation)
            });
            let Some(&(last, _)) = batch.last() else {
                break;
            };
            after = last;
            for (id, generation) in batch {
                if let Some(g) = generation {
                    let ino = Node::Sock(g, SockFile::Dir).ino();
                    out.push(DirEntry::new(ino, id + FIRST, d, id.to_string().as_bytes()));
                }
            }
        }
        out
    }

    /// A chunk of a tree directory (or of its connect view), resuming after
    /// the name the cookie stands for.
    fn tree_listing(
        &self,
        node: Node,
        dir: u64,
        fh: u64,
        offset: u64,
    ) -> Result<Vec<DirEntry>, Errno> {
        let view = matches!(node, Node::Connect(_));
        let file = self.files.get(fh).ok_or(Errno::EBADF)?;
        let FileKind::Dir(cursor) = &file.kind else {
            return Err(Errno::EBADF);
        };
        let mut cur = cursor.lock();
        let after = match offset {
            0 | DOT | DOTDOT => None,
            CONTROL => return Ok(Vec::new()),
            o => match cur.names.get(&o) {
                Some(name) => Some(name.clone()),
                None => {
                    log::info!("readdir of {dir}: unknown cookie {o}: end of listing");
                    return Ok(Vec::new());
                }
            },
        };
        let (parent, chunk) = self.eng.tree.readdir_after(dir, after.as_deref(), CHUNK)?;
        let shown = |ino: u64| if view { Node::Connect(ino).ino() } else { ino };
        let d = FileType::Directory;
        let mut out = dots_after(node.ino(), shown(parent), offset);
        out.reserve(chunk.len() + 1);
        let mut issued = HashMap::new();
        let mut whole = chunk.len() < CHUNK;
        // The handle keeps the name of every entry handed out, so hand out
        // what one reply takes, not the whole chunk.
        let mut room = REPLY_BYTES.saturating_sub(out.iter().map(|e| dirent_size(&e.name)).sum());
        cur.next = cur.next.max(FIRST);
        for (child, kind, name) in chunk {
            let need = dirent_size(&name);
            if need > room && !issued.is_empty() {
                whole = false;
                break;
            }
            room = room.saturating_sub(need);
            let ft = match kind {
                Kind::Dir => d,
                Kind::Symlink => FileType::Symlink,
                Kind::Socket if view => FileType::RegularFile,
                Kind::Socket => FileType::Socket,
            };
            let cookie = cur.next;
            cur.next += 1;
            out.push(DirEntry::new(shown(child), cookie, ft, &name));
            issued.insert(cookie, name);
        }
        if whole && dir == ROOT_INO && !view {
            let ctl = Node::Ctrl(Ctrl::Root).ino();
            out.push(DirEntry::new(ctl, CONTROL, d, tree::CONTROL_NAME));
        }
        // Every cookie handed out resumes: the kernel may stop anywhere.
        cur.names = issued;
        Ok(out)
    }
}
