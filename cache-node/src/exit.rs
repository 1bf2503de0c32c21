//! The start-up failures memcached exits with a status of its own for, and
//! that status: `imca cache-node` fails as memcached does, so scripts that
//! check the status keep working. Config, the flag checks of `compat.rs` and
//! the listeners raise them; the `imca` binary maps them with [`exit_status`].

/// A start-up refusal that memcached makes with exit status 64 (EX_USAGE);
/// `imca` exits with [`Usage::EXIT`] on it, as memcached does.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

impl Usage {
    pub const EXIT: i32 = 64;
}

/// A listener that cannot be made (`failed to listen on ...`): memcached
/// exits with status 71 (EX_OSERR) on it, and so does `imca`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OsErr(pub String);

impl OsErr {
    pub const EXIT: i32 = 71;
}

/// The exit status memcached would have for a start-up failure `e`.
pub fn exit_status(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<Usage>().is_some() {
        Usage::EXIT
    } else if e.downcast_ref::<OsErr>().is_some() {
        OsErr::EXIT
    } else {
        1
    }
}
