//! The `Translator` impl, generated from the op table: one request per
//! call, the reply's shape checked against the operation's result type.

use crate::ProtocolClient;
use async_trait::async_trait;
use wire::{Reply, ReplyShape, Request};
use xlator::*;

impl ProtocolClient {
    /// Send `req` and unwrap the reply shape `T` (another shape, or a reply
    /// bulk larger than the request allows, is EIO).
    async fn rpc<T: ReplyShape>(&self, req: Request) -> FsResult<T> {
        let (op, bulk_max) = (req.op(), req.reply_bulk_max());
        match self.call(req, bulk_max).await? {
            Reply::Data(d) if d.len() > bulk_max => {
                tracing::warn!(op = op.name(), "server returned {} bytes for a reply of at most {bulk_max}", d.len());
                Err(FsError::EIO)
            }
            reply => T::from_reply(reply).map_err(|other| self.unexpected(op.name(), &other)),
        }
    }
}

macro_rules! remote_fops {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        #[async_trait]
        impl Translator for ProtocolClient {
            fn name(&self) -> &str {
                self.label()
            }

            $(
                async fn $m(&self, $($a: $p),*) -> FsResult<$r> {
                    self.rpc(Request::$v { $($a: $a.to_wire()),* }).await
                }
            )*
        }
    };
}

for_each_fop!(remote_fops);
