//! memcached's slab classes, as accounting only: the store (`store.rs`)
//! charges each item against `-m` the size of the slab chunk memcached would
//! put it in, so `limit_maxbytes`, `evictions` and `stats slabs` behave as
//! memcached's do for the same items (evictions start at about the same item
//! count). Items are not actually laid out in slabs here.
//!
//! The classes are memcached 1.6's `slabs_init`: the first chunk is the item
//! header (48 bytes) plus `-n` (48), each next one `-f` (1.25) times larger,
//! rounded up to 8 bytes, up to half a slab page (512 KiB), which is the
//! last class. Bigger items are chained from chunks of that last class.

/// memcached's slab page (`slab_page_size`): what `total_malloced` counts in.
pub const PAGE: usize = 1 << 20;
/// memcached's `slab_chunk_size_max`: the largest chunk, half a page.
pub const CHUNK_MAX: usize = PAGE / 2;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES` (class ids 1..=62 are usable).
const MAX_CLASSES: usize = 63;
/// memcached's `sizeof(item)` with CAS, the start of the first chunk.
const ITEM_HEADER: usize = 48;
const ALIGN: usize = 8;
/// [`Classes::charge`] is in units of 2^-CHARGE_SHIFT bytes.
pub const CHARGE_SHIFT: u32 = 10;

/// The chunk sizes of classes 1..=N (index 0 is class 1).
#[derive(Debug, Clone)]
pub struct Classes {
    sizes: Vec<usize>,
}

impl Default for Classes {
    fn default() -> Self {
        Classes::new(48, 1.25)
    }
}

impl Classes {
    /// `min` = memcached's `-n` (bytes for key+value+flags in the first
    /// chunk), `factor` = `-f`; both validated by `compat.rs` (> 0, > 1).
    pub fn new(min: usize, factor: f64) -> Classes {
        let mut sizes = Vec::new();
        let mut size = ITEM_HEADER + min;
        while sizes.len() + 1 < MAX_CLASSES - 1 && (size as f64) < CHUNK_MAX as f64 / factor {
            size = size.next_multiple_of(ALIGN);
            sizes.push(size);
            // memcached keeps the size in an unsigned int: truncation
            size = (size as f64 * factor) as usize;
        }
        sizes.push(CHUNK_MAX);
        Classes { sizes }
    }

    /// How many classes there are (the largest id; never 0).
    pub fn count(&self) -> usize {
        self.sizes.len()
    }

    /// The class id (1-based) an item of `ntotal` bytes (memcached's
    /// `ITEM_ntotal`) lands in; items above [`CHUNK_MAX`] are chained from
    /// the largest class, as in memcached.
    pub fn id(&self, ntotal: usize) -> usize {
        self.sizes.partition_point(|&s| s < ntotal).min(self.sizes.len() - 1) + 1
    }

    /// Chunk size of class `id`.
    pub fn chunk(&self, id: usize) -> usize {
        self.sizes[id - 1]
    }

    /// Chunks of class `id` in one page (`chunks_per_page`).
    pub fn per_page(&self, id: usize) -> usize {
        PAGE / self.chunk(id)
    }

    /// (class id, chunks) an item of `ntotal` bytes takes.
    pub fn chunks(&self, ntotal: usize) -> (usize, usize) {
        let id = self.id(ntotal);
        (id, ntotal.div_ceil(self.chunk(id)))
    }

    /// (class id, what the item is charged against `-m`, in 1/1024 bytes):
    /// its chunks, each with its share of the page's unused tail, so that
    /// `-m` holds exactly as many same-sized items as memcached's pages do.
    pub fn charge(&self, ntotal: usize) -> (usize, usize) {
        let (id, chunks) = self.chunks(ntotal);
        (id, chunks * ((PAGE << CHARGE_SHIFT) / self.per_page(id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_classes_are_memcached_1_6s() {
        // memcached -vv: class 1 chunk 96, 2: 120, 3: 152, ... 12: 1184, 39: 524288
        let c = Classes::default();
        assert_eq!((c.chunk(1), c.chunk(2), c.chunk(3), c.chunk(12)), (96, 120, 152, 1184));
        assert_eq!((c.count(), c.chunk(39), c.chunk(38)), (39, CHUNK_MAX, 394840));
        assert_eq!((c.id(1), c.id(96), c.id(97), c.id(1184), c.id(1185)), (1, 1, 2, 12, 13));
        assert_eq!((c.per_page(1), c.per_page(12)), (10922, 885));
    }

    #[test]
    fn charges_are_whole_chunks() {
        let c = Classes::default();
        // memcached -m 8 holds 8 pages x 5461 items of ntotal 171 (chunk 192)
        assert_eq!(c.chunks(171), (4, 1));
        assert_eq!(((8 * PAGE) << CHARGE_SHIFT) / c.charge(171).1, 8 * 5461);
        assert_eq!(c.chunks(CHUNK_MAX + 1), (39, 2));
        assert_eq!(c.charge(CHUNK_MAX).1, CHUNK_MAX << CHARGE_SHIFT);
    }

    #[test]
    fn min_and_factor_shape_the_classes() {
        let c = Classes::new(100, 2.0);
        assert_eq!((c.chunk(1), c.chunk(2), c.chunk(3)), (152, 304, 608));
        assert_eq!(c.chunk(c.count()), CHUNK_MAX);
    }
}
