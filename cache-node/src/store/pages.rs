//! What memcached's slab allocator holds beyond `-m`, as far as a client
//! can tell: the bound stores evict down to ([`Store::bound_fixed`]) is the
//! limit, raised by two things memcached does with its 1 MiB pages (both
//! seen with Debian's memcached 1.6.18, `tests/lru_compat.rs`):
//!
//! - **A page once taken is kept.** `cache_memlimit` below what is in use
//!   frees nothing: memcached only stops taking new pages. `bytes` stays,
//!   nothing is evicted, later stores fill the free chunks of its pages and
//!   then evict one item each, minutes later still. (Until 2026-11-27 the
//!   next store here evicted down to the new limit: 20,834 items in one
//!   `set`.) Here `cache_memlimit` records the pages the items in use
//!   would take (whole pages per slab class) as a floor.
//! - **Every slab class gets its first page**, even past the limit: a
//!   500 KiB item stored into `-m 8` full of 100-byte items evicts nothing
//!   (memcached's `total_malloced` becomes 9 MiB). Here a class's first
//!   item never evicts: if it does not fit, it raises the bound by a page
//!   for good.
//!
//! Past those pages memcached evicts within the new item's slab class (a
//! third 500 KiB item evicts the first one, however old the small items
//! are); here evictions stay by bytes, the oldest items across classes
//! (`Store::with`), which is what the bank wants from a cache of mixed
//! sizes and what memcached's slab mover works towards.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::Store;
use crate::slabs::{CHARGE_SHIFT, PAGE};

/// A slab page in the units of the store's charges.
const PAGE_FIXED: usize = PAGE << CHARGE_SHIFT;

/// The pages held beyond the limit (in the units of the store's charges).
#[derive(Default)]
pub struct Pages {
    /// what was in use when `cache_memlimit` last changed the limit (0 = never)
    floor: AtomicUsize,
    /// first pages of slab classes taken past the bound since then
    extra: AtomicUsize,
}

impl Store {
    /// What stores evict down to: the limit, or the pages kept past it.
    pub(crate) fn bound_fixed(&self) -> usize {
        self.limit_fixed().max(self.pages.floor.load(Ordering::Relaxed)) + self.pages.extra.load(Ordering::Relaxed)
    }

    /// A store of `charge` into slab class `id`: the class's first item
    /// takes the class's first page, past the bound if it does not fit
    /// (memcached's `do_slabs_newslab` never refuses a class its first page).
    pub(super) fn first_page(&self, id: usize, charge: usize) {
        let seen = &self.per_class[id - 1].seen;
        if seen.load(Ordering::Relaxed) || seen.swap(true, Ordering::Relaxed) {
            return;
        }
        if self.used_fixed() + charge > self.bound_fixed() {
            self.pages.extra.fetch_add(PAGE_FIXED, Ordering::Relaxed);
        }
    }

    /// `cache_memlimit`: the new limit bounds the pages taken from now on;
    /// those holding items are kept (a class that had items keeps one page).
    /// A store racing this may take a first page that is then counted
    /// twice: one page, once, on an operator's command.
    pub fn set_limit(&self, bytes: usize) {
        let held: usize = (1..=self.classes.count())
            .map(|id| {
                let c = &self.per_class[id - 1];
                let pages = c.chunks.load(Ordering::Relaxed).div_ceil(self.classes.per_page(id));
                pages.max(usize::from(c.seen.load(Ordering::Relaxed))) * PAGE_FIXED
            })
            .sum();
        self.pages.floor.fetch_max(held, Ordering::Relaxed);
        self.pages.extra.store(0, Ordering::Relaxed);
        self.limit.store(bytes, Ordering::Relaxed);
    }
}
