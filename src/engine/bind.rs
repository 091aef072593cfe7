//! bind and autobind: the operations that give sockets names, and the
//! lookups that find a socket by name (unix_find_other).

use std::sync::Arc;

use nix::errno::Errno;

use super::kernel_dirs;
use super::log_limit::limited;
use super::name_table::AUTOBIND_SPACE;
use super::netns::NetNs;
use super::socket::{BoundName, SockType, Socket};
use super::tree::Maker;
use super::{Addr, Caller, Engine, NameKey, Result, random_u32};

impl Engine {
    /// Finds the socket an address names for a socket of type `ty` made in
    /// network namespace `ns` (unix_find_other): path lookups check
    /// permissions and type, abstract names live in one namespace per
    /// network namespace and type.
    pub fn find(
        &self,
        addr: &Addr,
        ty: SockType,
        ns: NetNs,
        caller: &Caller,
    ) -> Result<Arc<Socket>> {
        match addr {
            Addr::Path(p) => {
                let path = self.tree_path(p)?;
                if ty != SockType::Dgram {
                    self.mirror_kernel_dirs(path, caller, false)?;
                } else if self.tree.under_route(path)
                    && !self.tree.dgram_corrected(path)
                    && let Err(e) = self.correct_dirs(path, caller, false, false)
                {
                    self.tree.dgram_forget(path);
                    return Err(e);
                }
                let ino = self.tree.connect_node(path, caller)?;
                let s = self
                    .names
                    .lookup(&NameKey::Path(ino))
                    .ok_or(Errno::ECONNREFUSED)?;
                if s.ty != ty {
                    return Err(Errno::EPROTOTYPE);
                }
                Ok(s)
            }
            Addr::Abstract(n) => self
                .names
                .lookup(&NameKey::Abstract(ns, ty, n.clone()))
                .ok_or(Errno::ECONNREFUSED),
        }
    }

    /// The directories of tree path `path` given the owner, group and mode
    /// of the kernel's at the same path, as the caller's thread sees the
    /// kernel's tree (`kernel_dirs::View`), before a bind (`make`: missing
    /// ones made) or a connect walks them: the kernel's directories decide
    /// who may bind, connect and move names below them, not whoever made
    /// the mount's copies first (README "What is routed"). Only on a mount
    /// (the tree path is then a kernel path too), for a name below a route
    /// root a `udsfs run` declared (`Tree::under_route`: a plain mount's
    /// directories stay their makers'). A datagram send (`find`) corrects
    /// them too, at most once a `DGRAM_FRESH` per directory
    /// (`Tree::dgram_corrected`: no walk of the kernel's tree per message).
    /// EACCES when the walk meets another user's directory the caller may
    /// not take (`Tree::mirror`): that user could move names there, or
    /// have bound its own at the caller's name.
    fn mirror_kernel_dirs(&self, path: &[u8], caller: &Caller, make: bool) -> Result<()> {
        if self.tree.under_route(path) {
            self.correct_dirs(path, caller, make, false)?;
        }
        Ok(())
    }

    /// `udsfs run --route /P`'s declaration, by `caller`: tree path `P` is a
    /// route root from now on (`Tree::declare_route`), and its directories
    /// (`P`'s own too) are given the kernel's attributes at once, as
    /// `caller` sees them, so a copy another user made first is corrected
    /// before the run's program starts.
    pub fn declare_route(&self, path: &[u8], caller: &Caller) -> Result<()> {
        if let Err(e) = self.tree.declare_route(path, caller.fsuid) {
            limited!(
                info,
                "route declared by uid {} refused ({e}): {}",
                caller.fsuid,
                String::from_utf8_lossy(&path[..path.len().min(256)])
            );
            return Err(e);
        }
        // (another user's directory on the path is left as made; the
        // declaration stands, and the walks of requests below refuse it)
        let _ = self.correct_dirs(path, caller, false, true);
        Ok(())
    }

    /// The copies on tree path `path` (its last component too when `last`)
    /// given the kernel's attributes as `caller`'s thread sees them (`make`:
    /// missing ones made), as far as a declaration governs `caller`'s
    /// requests and lets it take them (`Tree::mirror`), each name dropped
    /// from a copy logged; EACCES when the walk ended at another user's
    /// directory the caller may not take.
    fn correct_dirs(&self, path: &[u8], caller: &Caller, make: bool, last: bool) -> Result<()> {
        if !self.tree.declared_for(path, caller.fsuid) {
            return Ok(());
        }
        let Some(dirs) = self.kernel_dirs(path, caller.tid, last) else {
            return Ok(());
        };
        let done = self.tree.mirror(path, &dirs, make, caller.fsuid);
        for name in done.dropped {
            limited!(
                info,
                "{}: a name in a copy of a kernel directory whose owner it was not made by, removed when the copy took the kernel directory's owner ({})",
                String::from_utf8_lossy(path),
                String::from_utf8_lossy(&name)
            );
        }
        if done.foreign {
            limited!(
                info,
                "{}: uid {}'s request refused (EACCES): a directory on the path is another user's, made in the mount where the kernel's directory is not its, and this request may not take it (README \"What is routed\")",
                String::from_utf8_lossy(&path[..path.len().min(256)]),
                caller.fsuid
            );
            return Err(Errno::EACCES);
        }
        Ok(())
    }

    /// The kernel's directories at the prefixes of tree path `path` (its
    /// last component too when `last`) as thread `tid` sees them
    /// (`kernel_dirs::View`), as many as the kernel has; None off a mount.
    fn kernel_dirs(&self, path: &[u8], tid: u32, last: bool) -> Option<Vec<Maker>> {
        let mount = self.tree.mount_point()?;
        let parts: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        let n = parts.len() - usize::from(!last && !parts.is_empty());
        if n == 0 {
            return None;
        }
        let view = kernel_dirs::View::of(tid, mount);
        let dirs = view.dirs(&parts, n).into_iter().map(|k| Maker {
            uid: k.uid,
            gid: k.gid,
            mode: k.mode,
        });
        Some(dirs.collect())
    }

    /// mkdir(2) of `name` in tree directory `parent` by thread `tid` as
    /// `m` asks: at a route's path (a route root, above or below one,
    /// declared by `m.uid`, root or the mount's owner: `Tree::is_route_copy`)
    /// where the kernel has a directory (as `tid` sees it), the new one is
    /// its copy and carries its owner, group and mode (README "What is
    /// routed"), so no routed program makes, and owns, the copy of a kernel
    /// directory it could not write. Elsewhere it is the maker's, as on a
    /// plain mount: another user's declaration does not take it (issue 29;
    /// one it squats at a declared path is taken back by the walk of a
    /// request the declaration governs, `Tree::mirror`).
    pub fn mkdir(&self, parent: u64, name: &[u8], m: Maker, tid: u32) -> Result<u64> {
        let kernel = self
            .tree
            .mount_point()
            .filter(|_| self.tree.any_route())
            .and_then(|_| self.tree.path_of(parent))
            .map(|p| [p.as_slice(), b"/", name].concat())
            .filter(|path| self.tree.is_route_copy(path, m.uid))
            .and_then(|path| {
                let n = path.split(|&b| b == b'/').filter(|c| !c.is_empty()).count();
                self.kernel_dirs(&path, tid, true).filter(|d| d.len() == n)
            });
        let m = kernel.and_then(|d| d.last().copied()).unwrap_or(m);
        Ok(self.tree.mkdir(parent, name, m)?.ino)
    }

    pub fn bind(&self, s: &Arc<Socket>, addr: &Addr, caller: &Caller) -> Result<()> {
        self.bind_as(s, addr, None, caller)
    }

    /// bind() of a path that the program gave as `given` (its sun_path), which
    /// getsockname, getpeername, recvfrom and accept then report.
    pub fn bind_as(
        &self,
        s: &Arc<Socket>,
        addr: &Addr,
        given: Option<&[u8]>,
        caller: &Caller,
    ) -> Result<()> {
        match addr {
            Addr::Path(p) => {
                let path = self.tree_path(p)?;
                // Like unix_bind_bsd: make the node first, then find the socket
                // already bound and take the node back.
                let perm = 0o777 & !caller.umask();
                self.mirror_kernel_dirs(path, caller, true)?;
                let ino = self.tree.bind_node(path, caller, perm)?;
                let _bind = s.bind_lock.lock();
                if s.lock().name.is_some() {
                    self.tree.unbind_node(path, ino);
                    return Err(Errno::EINVAL);
                }
                let key = NameKey::Path(ino);
                self.names.rebind(s, &NameKey::Unbound(s.id), key.clone())?;
                s.lock().name = Some(Arc::new(BoundName {
                    addr: addr.clone(),
                    key,
                    given: given.map(<[u8]>::to_vec),
                }));
                Ok(())
            }
            Addr::Abstract(n) => {
                let _bind = s.bind_lock.lock();
                if s.lock().name.is_some() {
                    return Err(Errno::EINVAL);
                }
                let key = NameKey::Abstract(s.netns, s.ty, n.clone());
                self.names.rebind(s, &NameKey::Unbound(s.id), key.clone())?;
                s.lock().name = Some(Arc::new(BoundName {
                    addr: addr.clone(),
                    key,
                    given: None,
                }));
                Ok(())
            }
        }
    }

    /// Autobind as unix_autobind: random start, linear scan with wrap,
    /// ENOSPC when every name of this type is taken; a no-op when bound.
    /// The name is taken in the socket's network namespace.
    pub fn autobind(&self, s: &Arc<Socket>, _caller: &Caller) -> Result<()> {
        let _bind = s.bind_lock.lock();
        if s.lock().name.is_some() {
            return Ok(());
        }
        let ns = s.netns;
        // Linux starts after a random number and scans every name once,
        // ending with the start itself; the taken-map skips known runs.
        let last = random_u32() % AUTOBIND_SPACE;
        let mut next = (last + 1) % AUTOBIND_SPACE;
        let mut left = AUTOBIND_SPACE;
        loop {
            let (n, skipped) = self
                .names
                .next_free_autobind(ns, s.ty, next, left)
                .ok_or(Errno::ENOSPC)?;
            left -= skipped + 1;
            next = (n + 1) % AUTOBIND_SPACE;
            let name = format!("{n:05x}").into_bytes();
            let key = NameKey::Abstract(ns, s.ty, name.clone());
            match self.names.rebind(s, &NameKey::Unbound(s.id), key.clone()) {
                Ok(()) => {
                    s.lock().name = Some(Arc::new(BoundName {
                        addr: Addr::Abstract(name),
                        key,
                        given: None,
                    }));
                    return Ok(());
                }
                Err(Errno::EADDRINUSE) if left > 0 => continue,
                Err(Errno::EADDRINUSE) => return Err(Errno::ENOSPC),
                Err(e) => return Err(e),
            }
        }
    }

    /// Autobind when SO_PASSCRED asks for it (connect, dgram send).
    pub(crate) fn autobind_if_passcred(&self, s: &Arc<Socket>, caller: &Caller) -> Result<()> {
        let need = {
            let st = s.lock();
            st.may_passcred() && st.name.is_none()
        };
        if need {
            self.autobind(s, caller)
        } else {
            Ok(())
        }
    }

    /// The socket bound at tree node `ino`, if the caller may connect to it
    /// (write permission on the node; the kernel checked the directories).
    pub fn find_by_node(&self, ino: u64, caller: &Caller) -> Result<Arc<Socket>> {
        self.tree.check_connect_node(ino, caller)?;
        self.names
            .lookup(&NameKey::Path(ino))
            .ok_or(Errno::ECONNREFUSED)
    }

    /// The socket bound at abstract `name` in the caller's network
    /// namespace, trying the types in turn.
    pub fn find_abstract_any(&self, name: &[u8], caller: &Caller) -> Option<Arc<Socket>> {
        let ns = caller.netns();
        [SockType::Stream, SockType::Seqpacket, SockType::Dgram]
            .into_iter()
            .find_map(|ty| self.names.lookup(&NameKey::Abstract(ns, ty, name.to_vec())))
    }
}
