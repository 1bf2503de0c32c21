//! SASL for the binary protocol (`-S`), as memcached's binary clients
//! speak it: list the mechanisms, then authenticate with PLAIN
//! (`\0user\0password`, checked against the `-Y` file's lines). Until then
//! every other binary request is answered "Auth failure." and not run, as
//! memcached does. memcached checks logins against Cyrus SASL's database;
//! we have only `-Y`'s lines, and PLAIN is the one mechanism that needs no more.
//!
//! ```text
//!  binary first byte under -S ─> sasl_pending ─ SASL_LIST_MECHS ─> "PLAIN"
//!                                             ─ SASL_AUTH PLAIN ok ─> "Authenticated", login done
//!                                             ─ anything else ─> Auth failure. (not run)
//! ```

use cache_proto::binary::{self, op, Request, Status};

use crate::auth::Login;
use crate::session::{After, Session};
use crate::stats::C;

const MECHS: &[u8] = b"PLAIN";

impl Session {
    /// A SASL request, or any request of a binary connection that has not
    /// logged in yet: `None` when the request may run.
    pub(crate) fn exec_sasl(&mut self, req: &Request<'_>, out: &mut Vec<u8>) -> Option<After> {
        let h = &req.header;
        let is_sasl = matches!(h.opcode, op::SASL_LIST_MECHS | op::SASL_AUTH | op::SASL_STEP);
        if !is_sasl && !self.sasl_pending {
            return None;
        }
        if !self.node.config.sasl {
            // no SASL on this node: memcached without -S does not know these
            binary::error(out, h, Status::UnknownCommand);
            return Some(After::Continue);
        }
        match h.opcode {
            op::SASL_LIST_MECHS => binary::response(out, h.opcode, 0, h.opaque, 0, &[], &[], MECHS),
            op::SASL_AUTH if req.key == MECHS && self.sasl_pending => {
                self.cnt.inc(C::AuthCmds);
                let users = self.node.config.auth.as_ref().expect("-S needs -Y");
                // PLAIN: [authzid] \0 authcid \0 password
                let mut parts = req.value.splitn(3, |&b| b == 0);
                let ok = match (parts.next(), parts.next(), parts.next()) {
                    (Some(_), Some(user), Some(pass)) => users.check(user, pass),
                    _ => false,
                };
                if ok {
                    self.sasl_pending = false;
                    self.login = Login::Done;
                    binary::response(out, h.opcode, 0, h.opaque, 0, &[], &[], b"Authenticated");
                } else {
                    self.cnt.inc(C::AuthErrors);
                    binary::error(out, h, Status::AuthError);
                }
            }
            // another mechanism, a step PLAIN never asks for, a second
            // login, or any request before the login
            _ => {
                if is_sasl {
                    self.cnt.inc(C::AuthCmds);
                }
                self.cnt.inc(C::AuthErrors);
                binary::error(out, h, Status::AuthError);
            }
        }
        Some(After::Continue)
    }
}
