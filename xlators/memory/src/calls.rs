//! Per-operation call counts: what reached the leaf. Tests of a caching
//! translator assert on these ("the second getattr never got here").

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! ops {
    ($($v:ident => $name:literal),* $(,)?) => {
        /// One file operation of the `Translator` trait.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Op { $($v),* }
        const N: usize = [$(Op::$v),*].len();
        impl Op {
            pub const ALL: [Op; N] = [$(Op::$v),*];
            /// The trait method's name.
            pub fn name(self) -> &'static str { match self { $(Op::$v => $name),* } }
        }
    };
}

ops! {
    Lookup => "lookup", Getattr => "getattr", Setattr => "setattr", Readlink => "readlink",
    Mknod => "mknod", Mkdir => "mkdir", Create => "create", Symlink => "symlink", Link => "link",
    Unlink => "unlink", Rmdir => "rmdir", Rename => "rename", Open => "open", Release => "release",
    Read => "read", Write => "write", Flush => "flush", Fsync => "fsync", Readdir => "readdir",
    Statfs => "statfs", Setxattr => "setxattr", Getxattr => "getxattr", Listxattr => "listxattr",
    Removexattr => "removexattr",
}

#[derive(Default)]
pub(crate) struct Calls([AtomicU64; N]);

impl Calls {
    pub(crate) fn inc(&self, op: Op) {
        self.0[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, op: Op) -> u64 {
        self.0[op as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}
