//! A program's file tree for the unit tests of bind.rs and routed.rs:
//! directories and files (a name ending in "file") at the paths it has,
//! links at others, a directory the caller may not search ("/locked"); and
//! what was done to it (a name ending in "full" is ENOSPC, one ending in
//! "gone" ENOENT).

use std::cell::RefCell;

use udsfs_proto::Res;

use crate::bind::Tree;
use crate::routed::{Kind, Links, Moves};

pub struct Fake {
    pub have: Vec<&'static [u8]>,
    /// Symbolic links: path and target.
    pub links: Vec<(&'static [u8], &'static [u8])>,
    pub done: RefCell<Vec<String>>,
}

/// The tests' mount `/m` with one route `/r`.
pub fn m_r() -> udsfs_proto::route::Routes {
    udsfs_proto::route::Routes {
        mount: b"/m".to_vec(),
        routes: vec![b"/r".to_vec()],
    }
}

pub fn ascii(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn fake(have: &[&'static [u8]], links: &[(&'static [u8], &'static [u8])]) -> Fake {
    Fake {
        have: have.to_vec(),
        links: links.to_vec(),
        done: RefCell::new(Vec::new()),
    }
}

impl Fake {
    fn note(&self, s: String) {
        self.done.borrow_mut().push(s);
    }

    /// What was done, taken.
    pub fn taken(&self) -> String {
        self.done
            .borrow_mut()
            .drain(..)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Fake {
    fn mode_here(&self, p: &[u8]) -> Res<u32> {
        // A directory the caller may not search: its entries are EACCES.
        if p.starts_with(b"/locked/") {
            return Err(libc::EACCES);
        }
        if !self.have.contains(&p) {
            return Err(libc::ENOENT);
        }
        if p.ends_with(b"file") {
            return Ok(libc::S_IFREG | 0o644);
        }
        Ok(libc::S_IFDIR | 0o700)
    }
}

impl Tree for Fake {
    /// Following a link: the mode of its target, ELOOP past 8 links.
    fn mode(&self, p: &[u8], follow: bool) -> Res<u32> {
        let mut p = p.to_vec();
        for _ in 0..8 {
            let Some(l) = self.links.iter().find(|l| l.0 == p.as_slice()) else {
                return self.mode_here(&p);
            };
            if !follow {
                return Ok(libc::S_IFLNK | 0o777);
            }
            p = l.1.to_vec();
        }
        Err(libc::ELOOP)
    }
    fn symlink(&self, target: &[u8], p: &[u8]) -> Res<()> {
        self.mode(p, false).map_or(Ok(()), |_| Err(libc::EEXIST))?;
        self.note(format!("link {} -> {}", ascii(p), ascii(target)));
        Ok(())
    }
    fn unlink_link(&self, p: &[u8]) {
        self.note(format!("unlink {}", ascii(p)));
    }
    fn mkdir(&self, inside: &[u8], mode: u32) {
        self.note(format!("mkdir {} {mode:o}", ascii(inside)));
    }
    fn chmod(&self, inside: &[u8], mode: u32) {
        self.note(format!("chmod {} {mode:o}", ascii(inside)));
    }
    /// A name ending in "ro" is not writable, one ending in "shut" not
    /// searchable.
    fn may(&self, p: &[u8], mask: i32) -> Res<()> {
        self.mode(p, true)?;
        if (mask & libc::W_OK != 0 && p.ends_with(b"ro"))
            || (mask & libc::X_OK != 0 && p.ends_with(b"shut"))
        {
            return Err(libc::EACCES);
        }
        Ok(())
    }
}

impl Links for Fake {
    fn readlink(&self, p: &[u8]) -> Res<Vec<u8>> {
        let l = self.links.iter().find(|l| l.0 == p).ok_or(libc::EINVAL)?;
        Ok(l.1.to_vec())
    }
    /// A name ending in "full" is ENOSPC.
    fn hard_link(&self, old: &[u8], new: &[u8]) -> Res<()> {
        if new.ends_with(b"full") {
            return Err(libc::ENOSPC);
        }
        self.note(format!("hard link {} {}", ascii(old), ascii(new)));
        Ok(())
    }
    /// Links followed (absolute targets); a node in the mount "/m" exists.
    fn resolve(&self, p: &[u8]) -> Res<Vec<u8>> {
        let mut p = p.to_vec();
        for _ in 0..8 {
            match self.links.iter().find(|l| l.0 == p.as_slice()) {
                Some(l) => p = l.1.to_vec(),
                None if p.starts_with(b"/m/") => return Ok(p),
                None => return self.mode_here(&p).map(|_| p),
            }
        }
        Err(libc::ELOOP)
    }
}

/// The parent of `p` and its last name.
fn split(p: &[u8]) -> (&[u8], &[u8]) {
    let i = p.iter().rposition(|&b| b == b'/').unwrap_or(0);
    (&p[..i], &p[i + 1..])
}

impl Fake {
    fn failing(&self, what: &str, p: &[u8]) -> Res<()> {
        if p.ends_with(b"full") {
            return Err(libc::ENOSPC);
        }
        if p.ends_with(b"gone") {
            return Err(libc::ENOENT);
        }
        self.note(format!("{what} {}", ascii(p)));
        Ok(())
    }
}

impl Moves for Fake {
    fn rename_node(&self, old: &[u8], new: &[u8]) -> Res<()> {
        self.failing(&format!("rename node {}", ascii(old)), new)
    }
    fn node_is_dir(&self, node: &[u8]) -> bool {
        self.have.contains(&node)
    }
    fn rmdir_node(&self, node: &[u8]) -> Res<()> {
        self.failing("rmdir node", node)
    }
    fn unlink_node(&self, node: &[u8]) -> Res<()> {
        self.failing("unlink node", node)
    }
    fn rename_path(&self, old: &[u8], new: &[u8]) -> Res<()> {
        self.failing(&format!("rename {}", ascii(old)), new)
    }
    fn entries(&self, path: &[u8]) -> Vec<(Vec<u8>, Kind)> {
        let dirs = self.have.iter().map(|p| (*p, Kind::Dir));
        let links = self.links.iter().map(|l| (l.0, Kind::Link));
        dirs.chain(links)
            .filter(|(p, _)| split(p).0 == path)
            .map(|(p, k)| (split(p).1.to_vec(), k))
            .collect()
    }
    fn say(&self, line: &str) {
        self.note(format!("say {line}"));
    }
}
