//! THE table of file operations — the one place an operation is declared.
//!
//! Like GlusterFS's `generator.py`, one table produces everything that used
//! to be written by hand for every operation: the [`Translator`] trait's
//! pass-through defaults, the [`Fop`] enum and its metric names, the
//! [`Around`] wrapper (io-stats), and — through the same macro in the crates
//! that own them — the storage RPC's requests (`wire`), the protocol-server's
//! dispatch and the protocol-client translator. Adding an operation means
//! adding one line here and implementing it where it does real work (posix,
//! stripe, the FUSE layer); every pass-through layer follows by itself.
//!
//! The table is grouped by what an operation may change ([`OpClass`]:
//! `read`, `data`, `namespace`, `control`). [`for_each_fop!`] gives the
//! lines without the groups; [`for_each_fop_by_class!`] with them, which is
//! how a translator that keeps state ([`crate::Stateful`]) is made to place
//! every mutation: its mutation methods have no default, so the compiler
//! names it when an operation is added to `data` or `namespace`.
//!
//! Each line reads
//!
//! ```text
//!  Variant method = opcode (arg: ParamType as WireType, …) -> Reply;
//! ```
//!
//! `ParamType` is what the trait method takes, `WireType` what a request
//! carries (owned; an argument of type `Data` travels as the message bulk,
//! uncopied), `opcode` is the operation's number on the wire (never reuse
//! one) and `Reply` the successful result. The table expands where
//! `xlator::*` is in scope (every consumer imports it).
//!
//! [`Translator`]: crate::Translator

/// Calls `$callback! { … }` with the table of file operations (see the module
/// docs for the line format).
#[macro_export]
macro_rules! for_each_fop {
    ($callback:ident) => {
        $crate::__fop_table! { flat $callback }
    };
}

/// Calls `$callback! { read { … } data { … } namespace { … } control { … } }`:
/// the same table grouped by [`OpClass`], for code that must place every
/// mutation (a translator that keeps state, the callbacks a mutation causes).
#[macro_export]
macro_rules! for_each_fop_by_class {
    ($callback:ident) => {
        $crate::__fop_table! { grouped $callback }
    };
}

/// THE table (see the module docs). Not called directly: through
/// [`for_each_fop!`] or [`for_each_fop_by_class!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __fop_table {
    ($mode:ident $callback:ident) => {
        $crate::__fop_emit! { $mode $callback
            // Reads: change nothing a cache keeps (atime is not promised).
            read {
                /// Find `name` in directory `parent`.
                Lookup lookup = 1 (parent: &Loc as Loc, name: &str as String) -> Attr;
                Getattr getattr = 2 (loc: &Loc as Loc) -> Attr;
                Readlink readlink = 4 (loc: &Loc as Loc) -> String;
                /// Read up to `size` bytes at `offset`; short only at end of file.
                Read read = 15 (loc: &Loc as Loc, offset: u64 as u64, size: u32 as u32) -> Data;
                /// List up to `max` entries after `cookie` (0 = from the start; each
                /// entry carries the cookie that continues after it). `plus` fills
                /// `attr`. "." and ".." are not included; the FUSE layer adds them.
                Readdir readdir = 19 (loc: &Loc as Loc, cookie: u64 as u64, max: u32 as u32, plus: bool as bool) -> Vec<DirEntry>;
                Statfs statfs = 20 (loc: &Loc as Loc) -> StatFs;
                Getxattr getxattr = 22 (loc: &Loc as Loc, name: &str as String) -> Data;
                Listxattr listxattr = 23 (loc: &Loc as Loc) -> Vec<String>;
                /// The attributes of several objects at once (a listing's, from
                /// the servers that did not list it): one per `locs`, None where
                /// a getattr of that one would have failed. At most
                /// [`crate::MAX_GETATTRS`] a call (more: EINVAL).
                Getattrs getattrs = 27 (locs: &[Loc] as Vec<Loc>) -> Vec<Option<Attr>>;
                /// A listing's names only, as `readdir` would list them (same
                /// cookies), without opening a single entry: a server reads the
                /// directory's own blocks and no inode, which is all a cold disk
                /// spends on a listing whose objects the bank knows.
                Names names = 28 (loc: &Loc as Loc, cookie: u64 as u64, max: u32 as u32) -> Vec<DirName>;
            }
            // Data mutations: change one object's contents or attributes, never a name
            // (open is here: with O_TRUNC it truncates).
            data {
                /// Change attributes; a `size` truncates or extends.
                Setattr setattr = 3 (loc: &Loc as Loc, set: &SetAttr as SetAttr) -> Attr;
                /// Opening is stateless end to end (servers keep a bounded fd cache
                /// keyed by file id); this call checks existence and access mode.
                Open open = 13 (loc: &Loc as Loc, flags: i32 as i32) -> ();
                Write write = 16 (loc: &Loc as Loc, offset: u64 as u64, data: Data as Data) -> WriteReply;
                Setxattr setxattr = 21 (loc: &Loc as Loc, name: &str as String, value: &[u8] as Data, flags: XattrFlags as XattrFlags) -> ();
                Removexattr removexattr = 24 (loc: &Loc as Loc, name: &str as String) -> ();
                /// Allocate, punch or zero `ranges` of the file (`mode`); the
                /// attributes after. Stripe sends each server only the extents
                /// it owns (at most [`crate::MAX_EXTENTS`] a call).
                Fallocate fallocate = 29 (loc: &Loc as Loc, mode: FallocMode as FallocMode, ranges: &[Extent] as Vec<Extent>) -> Attr;
                /// Copy bytes from file `src` to file `dst` where they are,
                /// without them crossing the gateway: each span's `len` bytes
                /// in full, in order (a server's copy past its end of the source
                /// reads zeros: a striped file's copy ends at its last unit, so
                /// stripe clips a copy to the file's size first). The answer is
                /// a write's: the bytes copied (a short count when one span could
                /// not be), `dst`'s attributes after when known. Within one
                /// file, overlapping spans: EINVAL.
                CopyRange copy_range = 30 (src: &Loc as Loc, dst: &Loc as Loc, ranges: &[$crate::CopySpan] as Vec<$crate::CopySpan>) -> WriteReply;
            }
            // Namespace mutations: add, remove or move a name.
            namespace {
                /// `mode` carries the file-type bits (S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK).
                Mknod mknod = 5 (parent: &Loc as Loc, new: &NewFile as NewFile, mode: u32 as u32, rdev: u32 as u32) -> Made;
                Mkdir mkdir = 6 (parent: &Loc as Loc, new: &NewFile as NewFile) -> Made;
                /// Create a regular file (and open it: `flags` are the open(2) flags).
                Create create = 7 (parent: &Loc as Loc, new: &NewFile as NewFile, flags: i32 as i32) -> Made;
                Symlink symlink = 8 (parent: &Loc as Loc, new: &NewFile as NewFile, target: &str as String) -> Made;
                Link link = 9 (loc: &Loc as Loc, newparent: &Loc as Loc, newname: &str as String) -> Made;
                Unlink unlink = 10 (parent: &Loc as Loc, name: &str as String) -> Removed;
                Rmdir rmdir = 11 (parent: &Loc as Loc, name: &str as String) -> Removed;
                Rename rename = 12 (parent: &Loc as Loc, name: &str as String, newparent: &Loc as Loc, newname: &str as String, flags: RenameFlags as RenameFlags) -> Renamed;
            }
            // Control: an open file's life and locks; no cached state changes
            // (flush and fsync only make changes durable).
            control {
                Release release = 14 (loc: &Loc as Loc) -> ();
                Flush flush = 17 (loc: &Loc as Loc) -> ();
                Fsync fsync = 18 (loc: &Loc as Loc, datasync: bool as bool) -> ();
                /// F_GETLK: the lock that would block `lock`, or `lock` itself
                /// with type `Unlock` when none would. Decided by the file's
                /// ordering server (see stripe).
                Getlk getlk = 25 (loc: &Loc as Loc, lock: &Lock as Lock) -> Lock;
                /// Take, change or drop a lock. A conflict fails with EAGAIN; with
                /// `wait` the server first holds the request a few seconds for the
                /// holder to let go (the caller asks again after EAGAIN).
                Setlk setlk = 26 (loc: &Loc as Loc, lock: &Lock as Lock, wait: bool as bool) -> ();
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __fop_emit {
    (flat $callback:ident $( $class:ident { $($line:tt)* } )*) => {
        $callback! { $($($line)*)* }
    };
    (grouped $callback:ident $($table:tt)*) => {
        $callback! { $($table)* }
    };
}

/// Turn a trait argument into what a request carries (`&str` → `String`,
/// `&[u8]` → `Data`, …): used by the code the table generates.
pub trait ToWire<W> {
    fn to_wire(self) -> W;
}

/// Lend a request's field to a trait method (`String` → `&str`, …): the
/// other direction of [`ToWire`].
pub trait AsParam<'a, P> {
    fn as_param(&'a self) -> P;
}

macro_rules! by_ref {
    ($($owned:ty => $param:ty),* $(,)?) => {$(
        impl<'a> ToWire<$owned> for &'a $param {
            fn to_wire(self) -> $owned {
                self.to_owned().into()
            }
        }
        impl<'a> AsParam<'a, &'a $param> for $owned {
            fn as_param(&'a self) -> &'a $param {
                self
            }
        }
    )*};
}

macro_rules! by_value {
    ($($t:ty),* $(,)?) => {$(
        impl ToWire<$t> for $t {
            fn to_wire(self) -> $t {
                self
            }
        }
        impl<'a> AsParam<'a, $t> for $t {
            fn as_param(&'a self) -> $t {
                self.clone()
            }
        }
    )*};
}

use crate::types::*;

by_ref!(Loc => Loc, NewFile => NewFile, SetAttr => SetAttr, Lock => Lock, String => str, Vec<Loc> => [Loc], Vec<Extent> => [Extent]);
by_ref!(Vec<crate::CopySpan> => [crate::CopySpan]);
by_value!(u32, i32, u64, bool, RenameFlags, XattrFlags, Data, FallocMode);

impl ToWire<Data> for &[u8] {
    fn to_wire(self) -> Data {
        Data::copy_from_slice(self)
    }
}
impl<'a> AsParam<'a, &'a [u8]> for Data {
    fn as_param(&'a self) -> &'a [u8] {
        self
    }
}

macro_rules! fop_enum {
    ($( $class:ident { $( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )* } )*) => {
        /// A file operation, as named in metrics and logs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Fop { $($($v,)*)* }

        impl Fop {
            pub const ALL: &'static [Fop] = &[$($(Fop::$v,)*)*];

            /// Lower-case name: the `op` label of every per-operation metric.
            pub fn name(self) -> &'static str {
                match self { $($(Fop::$v => stringify!($m),)*)* }
            }

            /// The operation's number on the wire.
            pub fn code(self) -> u8 {
                match self { $($(Fop::$v => $code,)*)* }
            }

            /// What the operation may change (its group in the table).
            pub fn class(self) -> OpClass {
                match self { $($(Fop::$v => op_class!($class),)*)* }
            }
        }
    };
}

macro_rules! op_class {
    (read) => { OpClass::Read };
    (data) => { OpClass::Data };
    (namespace) => { OpClass::Namespace };
    (control) => { OpClass::Control };
}

/// What an operation may change, as the table groups them. State kept
/// above the storage (the bank, the gateways' kernels and memos) must be
/// told of every `Data` and `Namespace` operation; see [`crate::Stateful`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// changes nothing a cache keeps (atime is not promised)
    Read,
    /// changes one object's contents or attributes, never a name
    Data,
    /// adds, removes or moves a name
    Namespace,
    /// an open file's life and its locks; changes nothing cached
    Control,
}

impl OpClass {
    pub fn mutates(self) -> bool {
        matches!(self, OpClass::Data | OpClass::Namespace)
    }
}

for_each_fop_by_class!(fop_enum);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_a_cache_must_hear_of_is_a_mutation() {
        let of = |c: OpClass| Fop::ALL.iter().filter(|f| f.class() == c).map(|f| f.name()).collect::<Vec<_>>();
        assert_eq!(of(OpClass::Data), ["setattr", "open", "write", "setxattr", "removexattr", "fallocate", "copy_range"]);
        assert_eq!(of(OpClass::Namespace), ["mknod", "mkdir", "create", "symlink", "link", "unlink", "rmdir", "rename"]);
        assert!(of(OpClass::Read).iter().chain(&of(OpClass::Control)).all(|n| !n.contains("write")));
        assert!(Fop::ALL.iter().all(|f| f.class().mutates() == matches!(f.class(), OpClass::Data | OpClass::Namespace)));
    }

    #[test]
    fn opcodes_are_unique() {
        let mut codes: Vec<u8> = Fop::ALL.iter().map(|f| f.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), Fop::ALL.len());
    }
}
