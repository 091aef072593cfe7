//! udsfs: the Linux AF_UNIX socket layer in userspace, exposed as a FUSE filesystem.
