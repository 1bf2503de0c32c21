//! A reliable-connected queue pair with its completion queue and completion
//! channel, and the state transitions we drive ourselves (rdma_cm only
//! supplies the addressing, so we can set the path MTU, GID index, ack
//! timeout and retry counts explicitly).

use super::cm::{set_nonblocking, CmId};
use super::device::{check, last_err};
use super::domain::Domain;
use super::RdmaOptions;
use rdma_sys::*;
use std::io;

pub(crate) struct Qp {
    pub qp: *mut ibv_qp,
    pub cq: *mut ibv_cq,
    pub comp: *mut ibv_comp_channel,
    /// Sends up to this many bytes are copied into the WQE (IBV_SEND_INLINE).
    pub max_inline: u32,
}

unsafe impl Send for Qp {}
unsafe impl Sync for Qp {}

impl Qp {
    pub(crate) fn create(dom: &Domain, send_wr: u32, recv_wr: u32) -> io::Result<Qp> {
        let ctx = dom.dev.ctx;
        unsafe {
            let comp = ibv_create_comp_channel(ctx);
            if comp.is_null() {
                return Err(last_err("ibv_create_comp_channel"));
            }
            let mut me = Qp { qp: std::ptr::null_mut(), cq: std::ptr::null_mut(), comp, max_inline: 0 };
            set_nonblocking((*comp).fd)?;
            me.cq = ibv_create_cq(ctx, (send_wr + recv_wr + 16) as i32, std::ptr::null_mut(), comp, 0);
            if me.cq.is_null() {
                return Err(last_err("ibv_create_cq"));
            }
            let mut init: ibv_qp_init_attr = std::mem::zeroed();
            init.send_cq = me.cq;
            init.recv_cq = me.cq;
            init.cap.max_send_wr = send_wr;
            init.cap.max_recv_wr = recv_wr;
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.cap.max_inline_data = 256;
            init.qp_type = ibv_qp_type::IBV_QPT_RC;
            me.qp = ibv_create_qp(dom.dev.pd, &mut init);
            if me.qp.is_null() {
                // some devices have no inline support
                init.cap.max_inline_data = 0;
                me.qp = ibv_create_qp(dom.dev.pd, &mut init);
            }
            if me.qp.is_null() {
                return Err(last_err("ibv_create_qp"));
            }
            me.max_inline = init.cap.max_inline_data;
            Ok(me)
        }
    }

    pub(crate) fn qp_num(&self) -> u32 {
        unsafe { (*self.qp).qp_num }
    }

    /// RESET -> INIT. `remote_access` is what the peer may do to our memory:
    /// a server passes none, so its memory is never reachable from a client.
    pub(crate) fn to_init(&self, id: &CmId, remote_access: ibv_access_flags) -> io::Result<()> {
        unsafe {
            let mut attr: ibv_qp_attr = std::mem::zeroed();
            let mut mask = 0;
            attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
            check(rdma_init_qp_attr(id.0, &mut attr, &mut mask), "rdma_init_qp_attr(INIT)")?;
            attr.qp_access_flags = remote_access.0;
            mask |= ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0 as i32;
            check(ibv_modify_qp(self.qp, &mut attr, mask), "ibv_modify_qp(INIT)")
        }
    }

    /// INIT -> RTR -> RTS once the peer's QP number is known to rdma_cm.
    pub(crate) fn to_rts(&self, id: &CmId, path_mtu: u8, roce: bool, opts: &RdmaOptions) -> io::Result<()> {
        unsafe {
            let mut attr: ibv_qp_attr = std::mem::zeroed();
            let mut mask = 0;
            attr.qp_state = ibv_qp_state::IBV_QPS_RTR;
            check(rdma_init_qp_attr(id.0, &mut attr, &mut mask), "rdma_init_qp_attr(RTR)")?;
            let cm_gid = attr.ah_attr.grh.sgid_index;
            // RoCE has no LIDs: every packet needs a GRH, addressed by a GID
            // index whose GID matches the IP we connect from (RoCE v2:
            // the IPv4-mapped entry). rdma_cm finds it; an operator may pin it.
            if let Some(g) = opts.gid_index {
                attr.ah_attr.grh.sgid_index = g;
            }
            if roce {
                attr.ah_attr.is_global = 1;
            }
            // The agreed MTU is the smaller of both ports' active MTUs.
            attr.path_mtu = path_mtu as ibv_mtu::Type;
            mask |= ibv_qp_attr_mask::IBV_QP_PATH_MTU.0 as i32;
            tracing::debug!(
                cm_gid,
                gid_index = attr.ah_attr.grh.sgid_index,
                is_global = attr.ah_attr.is_global,
                path_mtu = 128u32 << path_mtu,
                "RDMA QP to RTR"
            );
            check(ibv_modify_qp(self.qp, &mut attr, mask), "ibv_modify_qp(RTR)")?;

            let mut attr: ibv_qp_attr = std::mem::zeroed();
            let mut mask = 0;
            attr.qp_state = ibv_qp_state::IBV_QPS_RTS;
            check(rdma_init_qp_attr(id.0, &mut attr, &mut mask), "rdma_init_qp_attr(RTS)")?;
            attr.timeout = opts.ack_timeout;
            attr.retry_cnt = opts.retry_cnt;
            attr.rnr_retry = opts.rnr_retry;
            mask |= (ibv_qp_attr_mask::IBV_QP_TIMEOUT
                | ibv_qp_attr_mask::IBV_QP_RETRY_CNT
                | ibv_qp_attr_mask::IBV_QP_RNR_RETRY)
                .0 as i32;
            check(ibv_modify_qp(self.qp, &mut attr, mask), "ibv_modify_qp(RTS)")
        }
    }

    /// Move to ERR: every posted work request completes with a flush error.
    pub(crate) fn to_err(&self) {
        unsafe {
            let mut attr: ibv_qp_attr = std::mem::zeroed();
            attr.qp_state = ibv_qp_state::IBV_QPS_ERR;
            ibv_modify_qp(self.qp, &mut attr, ibv_qp_attr_mask::IBV_QP_STATE.0 as i32);
        }
    }

    /// Arm the CQ so the next completion raises an event on the channel fd.
    pub(crate) fn arm(&self) {
        unsafe {
            ibv_req_notify_cq(self.cq, 0);
        }
    }

    /// Consume pending channel events (non-blocking fd); returns how many.
    pub(crate) fn take_events(&self) -> u32 {
        let mut n = 0;
        unsafe {
            let mut cq = std::ptr::null_mut();
            let mut ctx = std::ptr::null_mut();
            while ibv_get_cq_event(self.comp, &mut cq, &mut ctx) == 0 {
                n += 1;
            }
            if n > 0 {
                ibv_ack_cq_events(self.cq, n);
            }
        }
        n
    }

    pub(crate) fn poll(&self, wcs: &mut [ibv_wc]) -> usize {
        let n = unsafe { ibv_poll_cq(self.cq, wcs.len() as i32, wcs.as_mut_ptr()) };
        n.max(0) as usize
    }

    pub(crate) fn comp_fd(&self) -> i32 {
        unsafe { (*self.comp).fd }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        unsafe {
            if !self.qp.is_null() {
                ibv_destroy_qp(self.qp);
            }
            if !self.cq.is_null() {
                ibv_destroy_cq(self.cq);
            }
            ibv_destroy_comp_channel(self.comp);
        }
    }
}
