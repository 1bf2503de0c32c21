//! Executes binary-protocol frames with memcached's status codes and quiet
//! semantics: quiet variants suppress success replies (and GetQ misses) but
//! never errors.

use cache_proto::binary::{self, op, Frame, Request, Status};
use cache_proto::text::StoreOp;

use crate::compat::VERSION;
use crate::node::{ArithResult, StoreResult};
use crate::session::{After, Session};
use crate::stats::C;

impl Session {
    pub(crate) fn exec_binary(&mut self, frame: Frame<'_>, out: &mut Vec<u8>) -> After {
        match frame {
            Frame::Error { header, status, swallow, close } => {
                self.cnt.inc(C::ClientErrors);
                binary::error(out, &header, status);
                if close {
                    After::Close
                } else if swallow > 0 {
                    After::Swallow(swallow)
                } else {
                    After::Continue
                }
            }
            // before a SASL login nothing may change, not even by a refusal
            Frame::TooLarge { header, swallow, .. } if self.sasl_pending => {
                self.cnt.inc(C::AuthErrors);
                binary::error(out, &header, Status::AuthError);
                After::Swallow(swallow)
            }
            Frame::TooLarge { header, key, swallow } => {
                let set = matches!(header.opcode, op::SET | op::SETQ);
                self.node.too_large(&mut self.cnt, set, key);
                binary::error(out, &header, Status::TooLarge);
                After::Swallow(swallow)
            }
            Frame::Request(req) => self.exec_bin_request(&req, out),
        }
    }

    fn exec_bin_request(&mut self, req: &Request<'_>, out: &mut Vec<u8>) -> After {
        if let Some(after) = self.exec_sasl(req, out) {
            return after;
        }
        let node = &*self.node;
        let clock = &node.store.clock;
        let h = &req.header;
        let quiet = req.quiet();
        let ok = |out: &mut Vec<u8>, cas: u64, extras: &[u8], key: &[u8], value: &[u8]| {
            binary::response(out, h.opcode, 0, h.opaque, cas, extras, key, value)
        };
        let err = |out: &mut Vec<u8>, s: Status| binary::error(out, h, s);
        match h.opcode {
            op::GET | op::GETQ | op::GETK | op::GETKQ | op::TOUCH | op::GAT | op::GATQ | op::GATK | op::GATKQ => {
                let with_key = matches!(h.opcode, op::GETK | op::GETKQ | op::GATK | op::GATKQ);
                let touch = (!req.extras.is_empty()).then(|| clock.realtime(req.extra_u32(0) as i32));
                let r = if h.opcode == op::TOUCH {
                    node.touch(&mut self.cnt, req.key, touch.unwrap_or(0)).then(|| {
                        node.store.with(req.key, |s| s.peek().map(|i| (crate::store::Value::from(&[][..]), i.flags, i.cas)))
                    }).flatten()
                } else {
                    node.get(&mut self.cnt, req.key, touch)
                };
                self.log_get(req.key, r.as_ref().map(|(v, ..)| v.len()));
                match r {
                    Some((v, flags, cas)) => {
                        let key: &[u8] = if with_key { req.key } else { &[] };
                        ok(out, cas, &flags.to_be_bytes(), key, &v);
                    }
                    None if quiet => {}
                    None if with_key => {
                        binary::response(out, h.opcode, Status::KeyNotFound as u16, h.opaque, 0, &[], req.key, &[])
                    }
                    None => err(out, Status::KeyNotFound),
                }
            }
            op::SET | op::SETQ | op::ADD | op::ADDQ | op::REPLACE | op::REPLACEQ | op::APPEND | op::APPENDQ
            | op::PREPEND | op::PREPENDQ => {
                let sop = match h.opcode {
                    op::SET | op::SETQ => StoreOp::Set,
                    op::ADD | op::ADDQ => StoreOp::Add,
                    op::REPLACE | op::REPLACEQ => StoreOp::Replace,
                    op::APPEND | op::APPENDQ => StoreOp::Append,
                    _ => StoreOp::Prepend,
                };
                let (flags, exptime) =
                    if req.extras.len() == 8 { (req.extra_u32(0), clock.realtime(req.extra_u32(4) as i32)) } else { (0, 0) };
                let looked = self.store_lookup(req.key);
                let r = node.store(&mut self.cnt, sop, req.key, flags, exptime, req.value, h.cas, false);
                self.log_store(looked, sop, h.cas, req.key, exptime, req.value.len(), &r);
                match r {
                    StoreResult::Stored(cas) => {
                        if !quiet {
                            ok(out, cas, &[], &[], &[])
                        }
                    }
                    StoreResult::Exists => err(out, Status::KeyExists),
                    StoreResult::NotFound => err(out, Status::KeyNotFound),
                    StoreResult::NoMemory => err(out, Status::NoMemory),
                    StoreResult::NotStored => err(
                        out,
                        match sop {
                            StoreOp::Add => Status::KeyExists,
                            StoreOp::Replace => Status::KeyNotFound,
                            _ => Status::NotStored,
                        },
                    ),
                }
            }
            op::DELETE | op::DELETEQ => match node.delete(&mut self.cnt, req.key, h.cas) {
                StoreResult::NotFound => err(out, Status::KeyNotFound),
                StoreResult::Exists => err(out, Status::KeyExists),
                _ => {
                    if !quiet {
                        ok(out, 0, &[], &[], &[])
                    }
                }
            },
            op::INCREMENT | op::INCREMENTQ | op::DECREMENT | op::DECREMENTQ => {
                let incr = matches!(h.opcode, op::INCREMENT | op::INCREMENTQ);
                let (delta, initial, exp) = (req.extra_u64(0), req.extra_u64(8), req.extra_u32(16));
                let create = (exp != u32::MAX).then(|| (initial, clock.realtime(exp as i32)));
                match node.arith(&mut self.cnt, incr, req.key, delta, create, h.cas) {
                    ArithResult::Value(v, cas) => {
                        if !quiet {
                            ok(out, cas, &[], &[], &v.to_be_bytes())
                        }
                    }
                    ArithResult::NotFound => err(out, Status::KeyNotFound),
                    ArithResult::NonNumeric => err(out, Status::DeltaBadval),
                    ArithResult::Exists => err(out, Status::KeyExists),
                }
            }
            op::QUIT | op::QUITQ => {
                if h.opcode == op::QUIT {
                    ok(out, 0, &[], &[], &[]);
                }
                return After::Close;
            }
            op::FLUSH | op::FLUSHQ if !node.config.flush_enabled => {
                self.cnt.inc(C::CmdFlush);
                err(out, Status::AuthError); // memcached: "Auth failure.", quiet or not
            }
            op::FLUSH | op::FLUSHQ => {
                let delay = if req.extras.len() == 4 { req.extra_u32(0) as i32 } else { 0 };
                node.flush_all(&mut self.cnt, delay);
                if !quiet {
                    ok(out, 0, &[], &[], &[]);
                }
            }
            op::NOOP => ok(out, 0, &[], &[], &[]),
            op::VERSION => ok(out, 0, &[], &[], VERSION.as_bytes()),
            op::STAT => {
                let args: Vec<&[u8]> = if req.key.is_empty() { vec![] } else { vec![req.key] };
                match crate::stats_reply::collect(node, &args) {
                    Some(list) => {
                        for (k, v) in list {
                            ok(out, 0, &[], k.as_bytes(), v.as_bytes());
                        }
                        ok(out, 0, &[], &[], &[]);
                    }
                    None => err(out, Status::KeyNotFound),
                }
            }
            _ => err(out, Status::UnknownCommand),
        }
        After::Continue
    }
}
