//! Executes text-protocol frames (meta commands go to `exec_meta`). Replies
//! are composed as `cache_proto::response` values, the type the bank's
//! client half parses them back into.

use cache_proto::response::{Response, Status};
use cache_proto::text::{reply, Command, Frame, StoreOp, NON_NUMERIC, NO_MEMORY, TOO_LARGE};

use crate::compat::VERSION;
use crate::node::{ArithResult, StoreResult};
use crate::out::Out;
use crate::session::{After, Session};
use crate::stats::C;

impl Session {
    pub(crate) fn exec_text(&mut self, frame: Frame<'_>, out: &mut Out) -> After {
        // memcached writes out what is queued at a get or mn; any other
        // command (even a quiet or failed one) queues a reply
        let flushes = matches!(&frame, Frame::Request { cmd: Command::Get { .. }, .. })
            || matches!(&frame, Frame::Request { cmd: Command::Meta(m), .. } if m.kind == cache_proto::meta::Kind::Noop);
        let after = self.exec_frame(frame, out);
        self.stacked = !flushes;
        after
    }

    fn exec_frame(&mut self, frame: Frame<'_>, out: &mut Out) -> After {
        let (frame, out) = match frame {
            Frame::Request { cmd, data } => return self.exec_command(cmd, data, out),
            f => (f, out.buf()),
        };
        match frame {
            Frame::Error { reply: r, noreply, swallow } => {
                self.cnt.inc(C::ClientErrors);
                if !noreply {
                    reply::line(out, r);
                }
                if swallow > 0 {
                    After::Swallow(swallow)
                } else {
                    After::Continue
                }
            }
            Frame::TooLarge { cmd, swallow } => {
                match &cmd {
                    Command::Store { op, key, noreply, .. } => {
                        self.node.too_large(&mut self.cnt, *op == StoreOp::Set, key);
                        if !noreply {
                            reply::line(out, TOO_LARGE);
                        }
                    }
                    Command::Meta(m) => {
                        let set = m.mode().is_none_or(|c| c == b'S');
                        self.node.too_large(&mut self.cnt, set, &m.key);
                        reply::line(out, TOO_LARGE);
                    }
                    _ => {}
                }
                After::Swallow(swallow)
            }
            Frame::Request { .. } => unreachable!("executed above"),
        }
    }

    fn exec_command(&mut self, cmd: Command<'_>, data: &[u8], o: &mut Out) -> After {
        // get and mg (values pinned, not copied) take the reply itself;
        // every other command composes bytes
        let cmd = match cmd {
            Command::Get { keys, cas, touch } => {
                self.exec_get(&keys, cas, touch, o);
                return After::Continue;
            }
            Command::Meta(m) => return self.exec_meta(m, data, o),
            c => c,
        };
        let out = o.buf();
        let node = &*self.node;
        let clock = &node.store.clock;
        match cmd {
            Command::Get { .. } | Command::Meta(_) => unreachable!("executed above"),
            Command::Store { op, key, flags, exptime, cas, noreply, .. } => {
                let exptime = clock.realtime(exptime);
                let looked = self.store_lookup(key);
                let r = node.store(&mut self.cnt, op, key, flags, exptime, data, cas, false);
                self.log_store(looked, op, cas, key, exptime, data.len(), &r);
                if !noreply {
                    let status = match r {
                        StoreResult::Stored(_) => Status::Stored,
                        StoreResult::NotStored => Status::NotStored,
                        StoreResult::Exists => Status::Exists,
                        StoreResult::NotFound => Status::NotFound,
                        StoreResult::NoMemory => {
                            reply::line(out, NO_MEMORY);
                            return After::Continue;
                        }
                    };
                    status.encode(out);
                }
            }
            Command::Delete { key, noreply } => {
                let r = node.delete(&mut self.cnt, key, 0);
                if !noreply {
                    (if r == StoreResult::NotFound { Status::NotFound } else { Status::Deleted }).encode(out);
                }
            }
            Command::Arith { incr, key, delta, noreply } => {
                let r = node.arith(&mut self.cnt, incr, key, delta, None, 0);
                if !noreply {
                    match r {
                        ArithResult::Value(v, _) => Response::<&[u8]>::Number(v).encode(out),
                        ArithResult::NotFound | ArithResult::Exists => Status::NotFound.encode(out),
                        ArithResult::NonNumeric => reply::line(out, NON_NUMERIC),
                    }
                }
            }
            Command::Touch { key, exptime, noreply } => {
                let hit = node.touch(&mut self.cnt, key, clock.realtime(exptime));
                if !noreply {
                    (if hit { Status::Touched } else { Status::NotFound }).encode(out);
                }
            }
            Command::FlushAll { delay, noreply } => {
                if !node.config.flush_enabled {
                    self.cnt.inc(C::CmdFlush); // memcached counts the refused ones too
                    if !noreply {
                        reply::line(out, "CLIENT_ERROR flush_all not allowed");
                    }
                } else {
                    node.flush_all(&mut self.cnt, delay);
                    if !noreply {
                        Status::Ok.encode(out);
                    }
                }
            }
            Command::Stats { args } => crate::stats_reply::stats(node, &args, out),
            Command::Version => Response::Version(VERSION.as_bytes()).encode(out),
            Command::Verbosity { noreply } => {
                if !noreply {
                    Status::Ok.encode(out);
                }
            }
            Command::Quit => return After::Close,
            Command::Shutdown { .. } if !node.config.shutdown_enabled => {
                Response::Error(b"shutdown not enabled".as_slice()).encode(out)
            }
            Command::Shutdown { graceful: None } => reply::line(out, "CLIENT_ERROR invalid shutdown mode"),
            Command::Shutdown { graceful: Some(_) } => {
                // -A: as memcached, close this connection and stop the node
                // (gracefully either way: in-flight requests finish)
                tracing::info!("shutdown command received (-A): stopping");
                node.shutdown.notify_one();
                return After::Close;
            }
            Command::CacheMemlimit { mb, noreply } => {
                // memcached's floor; a lower limit evicts nothing (`store/pages.rs`)
                let reply = if mb < 8 {
                    "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m"
                } else {
                    node.store.set_limit((mb as usize).saturating_mul(1 << 20));
                    "OK"
                };
                if !noreply {
                    reply::line(out, reply);
                }
            }
            Command::Tuning { reply, .. } => reply::line(out, reply),
            Command::Watch { kinds, noreply } => return self.watch(&kinds, noreply, out),
        }
        After::Continue
    }
}
