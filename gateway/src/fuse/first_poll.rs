//! Run a FUSE request's future on the fuser thread that read it until it
//! first waits, and only then hand it to the runtime.
//!
//! Spawning every request costs a thread wake-up before any work is done
//! (the fuser thread queues the task, a sleeping tokio worker is woken to
//! poll it), and the profile of a bank-served `stat` showed most of the
//! gateway's CPU in such wake-ups (docs/benchmarks/archive/issue-12-kernel-caching.md, "Where a request's
//! time goes"). Polled here first, a request the gateway answers itself
//! (memo, lease) is answered with no hand-off at all, and one that waits
//! on the network has already sent its request when it parks.
//!
//! A parked request is not spawned at once: its waker spawns it when the
//! reply arrives. That wake runs on the worker that read the reply, where
//! tokio puts the spawned task in the worker's own next slot, so the
//! request is finished on that thread without waking another.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering::{AcqRel, Acquire, Release}};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Being polled here; a wake now must not be lost.
const POLLING: u8 = 0;
/// Woken while being polled: spawn it instead of parking it.
const WOKEN: u8 = 1;
/// Parked in `slot`: the next wake spawns it.
const PARKED: u8 = 2;
/// Handed to the runtime (or finished): wakes are the runtime's business.
const GONE: u8 = 3;

struct Parked {
    rt: tokio::runtime::Handle,
    state: AtomicU8,
    slot: Mutex<Option<Task>>,
}

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self.state.compare_exchange(POLLING, WOKEN, AcqRel, Acquire) {
            Ok(_) => {}
            Err(PARKED) => {
                if self.state.compare_exchange(PARKED, GONE, AcqRel, Acquire).is_ok() {
                    let task = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                    if let Some(task) = task {
                        self.rt.spawn(task);
                    }
                }
            }
            Err(_) => {} // already woken or already spawned
        }
    }
}

/// Poll `work` on this thread (inside `rt`'s context) until it first
/// waits; then it continues on `rt` when woken. It is one operation: its
/// storage calls share one deadline (`protocol_client::deadline`).
pub fn run(rt: &tokio::runtime::Handle, work: impl Future<Output = ()> + Send + 'static) {
    let _in_rt = rt.enter();
    let mut task: Task = Box::pin(protocol_client::operation(work));
    let parked = Arc::new(Parked { rt: rt.clone(), state: AtomicU8::new(POLLING), slot: Mutex::new(None) });
    let waker = Waker::from(parked.clone());
    if task.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
        parked.state.store(GONE, Release);
        return;
    }
    *parked.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    if parked.state.compare_exchange(POLLING, PARKED, AcqRel, Acquire).is_err() {
        // woken while it was being polled: the reply is already here
        parked.state.store(GONE, Release);
        let task = parked.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            rt.spawn(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    #[test]
    fn ready_work_runs_on_the_calling_thread() {
        let rt = runtime();
        let here = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        run(rt.handle(), async move { tx.send(std::thread::current().id()).unwrap() });
        assert_eq!(rx.try_recv().unwrap(), here, "finished before run returned, on this thread");
    }

    #[test]
    fn waiting_work_finishes_on_the_runtime_when_woken() {
        let rt = runtime();
        let (wake_tx, wake_rx) = tokio::sync::oneshot::channel::<u32>();
        let (tx, rx) = std::sync::mpsc::channel();
        run(rt.handle(), async move {
            let v = wake_rx.await.unwrap();
            tx.send((v, std::thread::current().id())).unwrap();
        });
        assert!(rx.try_recv().is_err(), "parked: nothing has woken it");
        rt.spawn(async move { wake_tx.send(7).unwrap() });
        let (v, thread) = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("woken work finishes");
        assert_eq!(v, 7);
        assert_ne!(thread, std::thread::current().id());
    }

    #[test]
    fn a_wake_during_the_first_poll_is_not_lost() {
        let rt = runtime();
        let (tx, rx) = std::sync::mpsc::channel();
        run(rt.handle(), async move {
            tokio::task::yield_now().await; // wakes itself while being polled
            tx.send(()).unwrap();
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("self-woken work finishes");
    }

    #[test]
    fn timers_and_spawns_work_in_the_first_poll() {
        let rt = runtime();
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let d = done.clone();
        run(rt.handle(), async move {
            tokio::spawn(async {}).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            d.store(true, SeqCst);
            tx.send(()).unwrap();
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("finishes");
        assert!(done.load(SeqCst));
    }

    #[test]
    fn many_racing_wakes_finish_every_request() {
        let rt = runtime();
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..2000u32 {
            let (wtx, wrx) = tokio::sync::oneshot::channel::<u32>();
            // the waker runs on a worker while this thread may still be polling
            rt.spawn(async move { let _ = wtx.send(i); });
            let tx = tx.clone();
            run(rt.handle(), async move { tx.send(wrx.await.unwrap()).unwrap() });
        }
        let mut got: Vec<u32> = (0..2000).map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap()).collect();
        got.sort();
        assert_eq!(got, (0..2000).collect::<Vec<_>>());
    }
}
