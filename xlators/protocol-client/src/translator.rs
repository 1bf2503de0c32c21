//! The `Translator` impl: one request per call, reply shape checked.

use crate::ProtocolClient;
use async_trait::async_trait;
use wire::{Reply, Request, XATTR_SIZE_MAX};
use xlator::*;

/// Unwrap the expected reply shape, or EIO.
macro_rules! expect {
    ($self:ident, $op:literal, $call:expr, $pat:pat => $v:expr) => {
        match $call.await? {
            $pat => Ok($v),
            other => Err($self.unexpected($op, &other)),
        }
    };
}

#[async_trait]
impl Translator for ProtocolClient {
    fn name(&self) -> &str {
        self.label()
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        let r = Request::Lookup { parent: parent.clone(), name: name.into() };
        expect!(self, "lookup", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        expect!(self, "getattr", self.call(Request::Getattr { loc: loc.clone() }, 0), Reply::Attr(a) => a)
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        let r = Request::Setattr { loc: loc.clone(), set: set.clone() };
        expect!(self, "setattr", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn readlink(&self, loc: &Loc) -> FsResult<String> {
        expect!(self, "readlink", self.call(Request::Readlink { loc: loc.clone() }, 0), Reply::Target(t) => t)
    }

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Attr> {
        let r = Request::Mknod { parent: parent.clone(), new: new.clone(), mode, rdev };
        expect!(self, "mknod", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Attr> {
        let r = Request::Mkdir { parent: parent.clone(), new: new.clone() };
        expect!(self, "mkdir", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Attr> {
        let r = Request::Create { parent: parent.clone(), new: new.clone(), flags };
        expect!(self, "create", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Attr> {
        let r = Request::Symlink { parent: parent.clone(), new: new.clone(), target: target.into() };
        expect!(self, "symlink", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Attr> {
        let r = Request::Link { loc: loc.clone(), newparent: newparent.clone(), newname: newname.into() };
        expect!(self, "link", self.call(r, 0), Reply::Attr(a) => a)
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = Request::Unlink { parent: parent.clone(), name: name.into() };
        expect!(self, "unlink", self.call(r, 0), Reply::Removed(x) => x)
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = Request::Rmdir { parent: parent.clone(), name: name.into() };
        expect!(self, "rmdir", self.call(r, 0), Reply::Removed(x) => x)
    }

    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        let r = Request::Rename {
            parent: parent.clone(),
            name: name.into(),
            newparent: newparent.clone(),
            newname: newname.into(),
            flags,
        };
        expect!(self, "rename", self.call(r, 0), Reply::Renamed(x) => x)
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        expect!(self, "open", self.call(Request::Open { loc: loc.clone(), flags }, 0), Reply::Unit => ())
    }

    async fn release(&self, loc: &Loc) -> FsResult<()> {
        expect!(self, "release", self.call(Request::Release { loc: loc.clone() }, 0), Reply::Unit => ())
    }

    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        let r = Request::Read { loc: loc.clone(), offset, size };
        let data = expect!(self, "read", self.call(r, size as usize), Reply::Data(d) => d)?;
        if data.len() > size as usize {
            tracing::warn!("server returned {} bytes for a read of {size}", data.len());
            return Err(FsError::EIO);
        }
        Ok(data)
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        let r = Request::Write { loc: loc.clone(), offset, data };
        expect!(self, "write", self.call(r, 0), Reply::Written(w) => w)
    }

    async fn flush(&self, loc: &Loc) -> FsResult<()> {
        expect!(self, "flush", self.call(Request::Flush { loc: loc.clone() }, 0), Reply::Unit => ())
    }

    async fn fsync(&self, loc: &Loc, datasync: bool) -> FsResult<()> {
        expect!(self, "fsync", self.call(Request::Fsync { loc: loc.clone(), datasync }, 0), Reply::Unit => ())
    }

    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        let r = Request::Readdir { loc: loc.clone(), cookie, max, plus };
        expect!(self, "readdir", self.call(r, 0), Reply::Entries(e) => e)
    }

    async fn statfs(&self, loc: &Loc) -> FsResult<StatFs> {
        expect!(self, "statfs", self.call(Request::Statfs { loc: loc.clone() }, 0), Reply::StatFs(s) => s)
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        let r = Request::Setxattr { loc: loc.clone(), name: name.into(), flags, value: Data::copy_from_slice(value) };
        expect!(self, "setxattr", self.call(r, 0), Reply::Unit => ())
    }

    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        let r = Request::Getxattr { loc: loc.clone(), name: name.into() };
        expect!(self, "getxattr", self.call(r, XATTR_SIZE_MAX), Reply::Data(d) => d)
    }

    async fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        expect!(self, "listxattr", self.call(Request::Listxattr { loc: loc.clone() }, 0), Reply::Names(n) => n)
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        let r = Request::Removexattr { loc: loc.clone(), name: name.into() };
        expect!(self, "removexattr", self.call(r, 0), Reply::Unit => ())
    }
}
