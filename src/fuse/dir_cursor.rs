//! What a listing hands out (`DirEntry`) and where an open directory's
//! listing got to (`DirCursor`), kept by its handle between chunks
//! (src/fuse/readdir.rs makes them; src/fuse/files.rs keeps the cursor).

use std::collections::HashMap;

use fuser::FileType;

use crate::engine::quota::Charge;

/// One entry of a listing, with the cookie that resumes after it.
#[derive(Clone)]
pub struct DirEntry {
    pub ino: u64,
    pub cookie: u64,
    pub kind: FileType,
    pub name: Vec<u8>,
}

impl DirEntry {
    pub(super) fn new(ino: u64, cookie: u64, kind: FileType, name: &[u8]) -> DirEntry {
        DirEntry {
            ino,
            cookie,
            kind,
            name: name.to_vec(),
        }
    }
}

/// Where the listing of an open tree directory got to: the cookies of the
/// last chunk, with the name each stands for. An open `.udsfs/abstract`
/// keeps its whole listing instead, made at its first chunk, with what it
/// holds charged to its reader.
#[derive(Default)]
pub struct DirCursor {
    pub(super) names: HashMap<u64, Vec<u8>>,
    pub(super) next: u64,
    pub(super) listed: Option<(Vec<DirEntry>, Charge)>,
}
