//! A global allocator's first allocations from a fixed arena in the program's own memory; then another
//! allocator's (the edge worker: talc's).
//!
//! Why: V8 compiles each wasm function on its first call, and talc's `allocate` and `deallocate` are about 1.7 KB
//! of wasm that a new edge isolate's first request would otherwise compile before its answer (BENCHMARKS.md, issue
//! 28). Bumping a pointer through an arena is a few instructions. The arena's bytes are never reused: what a first
//! request frees there stays spent. It closes at the first allocation it cannot hold, so a warm isolate allocates
//! from the next allocator alone, at the cost of one comparison per call; freeing asks whether the pointer is the
//! arena's. Written here rather than taken from a crate: a bump arena that hands over to another allocator is the
//! whole of it, and the crates that bump (bumpalo and the like) are arenas for values, not a front for the global
//! allocator.
//!
//! Only for a target without threads (wasm32 without `atomics`): the allocator is `Sync` on that promise alone.

#![cfg_attr(not(test), no_std)]

use core::alloc::{GlobalAlloc, Layout};
use core::cell::{Cell, UnsafeCell};

/// The arena's bytes: a static of its own, all zeros, so that it takes no room in the module (a static with any
/// other byte in it is written out whole, zeros included, as a data segment). The first [`FirstArena`] to allocate
/// claims it; any other given the same arena finds it claimed and allocates from its next allocator alone.
pub struct Arena<const N: usize> {
    bytes: UnsafeCell<[u8; N]>,
    claimed: Cell<bool>,
}

// SAFETY: as `FirstArena`'s below: a target without threads. Its bytes are touched only through the pointers the one
// `FirstArena` that claimed it hands out, once each.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<const N: usize> Sync for Arena<N> {}

impl<const N: usize> Arena<N> {
    /// `N` zero bytes, unclaimed.
    pub const fn new() -> Self {
        Self {
            bytes: UnsafeCell::new([0; N]),
            claimed: Cell::new(false),
        }
    }
}

impl<const N: usize> Default for Arena<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A global allocator whose first allocations bump through an arena of `N` bytes, then go to `next`.
pub struct FirstArena<A: 'static, const N: usize> {
    next: A,
    arena: &'static Arena<N>,
    /// Bytes of the arena handed out; `N` once it closed (or when another claimed it first).
    top: Cell<usize>,
}

// SAFETY: only on a target without threads (wasm32 without `atomics`, as talc's own cell requires): no two calls
// can run at once. Elsewhere it is not `Sync`, so it cannot be a global allocator there (the host's unit tests use
// an instance of their own each).
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<A: Sync, const N: usize> Sync for FirstArena<A, N> {}

impl<A, const N: usize> FirstArena<A, N> {
    /// An allocator that hands out `arena`'s bytes first, then `next`'s.
    pub const fn new(next: A, arena: &'static Arena<N>) -> Self {
        Self {
            next,
            arena,
            top: Cell::new(0),
        }
    }

    fn base(&self) -> *mut u8 {
        self.arena.bytes.get().cast()
    }

    /// Whether `ptr` was handed out by the arena.
    fn holds(&self, ptr: *mut u8) -> bool {
        let offset = (ptr as usize).wrapping_sub(self.base() as usize);
        offset < N
    }

    /// `layout` from the arena, or `None` (and the arena closed) when it does not fit.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        let top = self.top.get();
        if top == N {
            return None;
        }
        // Before the first allocation (the top never comes back to 0: a block shrunk in place keeps a byte at
        // least), the arena is claimed, or found another's.
        if top == 0 && self.arena.claimed.replace(true) {
            self.top.set(N);
            return None;
        }
        let base = self.base() as usize;
        let start = (base + top).checked_next_multiple_of(layout.align())? - base;
        match start.checked_add(layout.size()) {
            Some(end) if end <= N => {
                self.top.set(end);
                Some(self.base().wrapping_add(start))
            }
            _ => {
                self.top.set(N);
                None
            }
        }
    }
}

// SAFETY: every pointer handed out is either the arena's, in bounds, aligned and never handed out twice (the top
// only grows, except when the last allocation is resized in place), or `next`'s, which gets back only its own.
unsafe impl<A: GlobalAlloc, const N: usize> GlobalAlloc for FirstArena<A, N> {
    // Out of line, the three of them: inlined, the arena's checks would be copied into every caller that frees
    // (a function of the first request had 27 such places), where a call to talc's was before.
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => ptr,
            // SAFETY: the caller's contract, passed on.
            None => unsafe { self.next.alloc(layout) },
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.holds(ptr) {
            // SAFETY: not the arena's, so `next`'s, with the layout it was allocated with.
            unsafe { self.next.dealloc(ptr, layout) }
        }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.holds(ptr) {
            // SAFETY: `next`'s pointer, passed on with the caller's contract.
            return unsafe { self.next.realloc(ptr, layout, new_size) };
        }
        let offset = ptr as usize - self.base() as usize;
        // The arena's last allocation grows or shrinks where it is, while it fits and the arena is open.
        let top = self.top.get();
        if top != N && offset + layout.size() == top && new_size <= N - offset {
            self.top.set(offset + new_size);
            return ptr;
        }
        // SAFETY: `new_size` is non-zero and, rounded up to the alignment, fits `isize` (the caller's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as `alloc`'s.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct, and at least this long.
            unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::System;

    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn the_first_allocations_are_the_arenas_aligned_then_the_next_allocators() {
        let a = FirstArena::<System, 64>::new(System, Box::leak(Box::new(Arena::new())));
        // SAFETY: non-zero layouts; every pointer freed once, with its layout; writes within what was allocated.
        unsafe {
            let p = a.alloc(layout(3, 1));
            let q = a.alloc(layout(8, 8));
            assert!(a.holds(p) && a.holds(q));
            assert_eq!(q as usize % 8, 0);
            assert!(q as usize >= p as usize + 3, "no overlap");
            // 60 bytes do not fit in what is left: from System, and the arena closes.
            let r = a.alloc(layout(60, 4));
            assert!(!a.holds(r));
            assert_eq!(a.top.get(), 64);
            let s = a.alloc(layout(1, 1));
            assert!(!a.holds(s), "closed for good, though a byte would fit");
            r.write_bytes(7, 60);
            a.dealloc(r, layout(60, 4));
            a.dealloc(s, layout(1, 1));
            a.dealloc(p, layout(3, 1));
            a.dealloc(q, layout(8, 8));
        }
    }

    #[test]
    fn the_last_allocation_grows_in_place_and_others_move_with_their_bytes() {
        let a = FirstArena::<System, 64>::new(System, Box::leak(Box::new(Arena::new())));
        // SAFETY: as above; each pointer resized is live, with its current layout, and not used after.
        unsafe {
            let p = a.alloc(layout(4, 1));
            p.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
            let grown = a.realloc(p, layout(4, 1), 10);
            assert_eq!(grown, p, "the last allocation grows where it is");
            assert_eq!(a.top.get(), 10);
            let q = a.alloc(layout(2, 1));
            // No longer the last: moved, its bytes with it.
            let moved = a.realloc(p, layout(10, 1), 20);
            assert_ne!(moved, p);
            assert!(a.holds(moved));
            assert_eq!(std::slice::from_raw_parts(moved, 4), b"abcd");
            // Past the arena: to System, its bytes with it, and System's pointer resized by System.
            let out = a.realloc(moved, layout(20, 1), 100);
            assert!(!a.holds(out));
            assert_eq!(std::slice::from_raw_parts(out, 4), b"abcd");
            let out = a.realloc(out, layout(100, 1), 200);
            assert_eq!(std::slice::from_raw_parts(out, 4), b"abcd");
            a.dealloc(out, layout(200, 1));
            a.dealloc(q, layout(2, 1));
        }
    }

    #[test]
    fn a_closed_arena_stays_closed() {
        let a = FirstArena::<System, 16>::new(System, Box::leak(Box::new(Arena::new())));
        // SAFETY: as above.
        unsafe {
            // Filled exactly: spent, and closed as if an allocation had not fitted.
            let p = a.alloc(layout(16, 1));
            assert!(a.holds(p));
            p.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
            let q = a.alloc(layout(1, 1));
            assert!(!a.holds(q));
            // Even the last allocation, shrunk, moves out: the arena never opens again.
            let r = a.realloc(p, layout(16, 1), 4);
            assert!(!a.holds(r));
            assert_eq!(std::slice::from_raw_parts(r, 4), b"abcd");
            assert_eq!(a.top.get(), 16);
            a.dealloc(r, layout(4, 1));
            a.dealloc(q, layout(1, 1));
        }
    }

    #[test]
    fn a_block_shrunk_in_place_leaves_its_tail_to_the_next() {
        let a = FirstArena::<System, 64>::new(System, Box::leak(Box::new(Arena::new())));
        // SAFETY: as above.
        unsafe {
            let p = a.alloc(layout(1, 1));
            // After padding to 8: grown, then shrunk, where it is.
            let q = a.alloc(layout(8, 8));
            let offset = q as usize - a.base() as usize;
            assert_eq!(a.top.get(), offset + 8);
            assert_eq!(a.realloc(q, layout(8, 8), 24), q);
            assert_eq!(a.top.get(), offset + 24);
            assert_eq!(a.realloc(q, layout(24, 8), 2), q);
            assert_eq!(a.top.get(), offset + 2);
            let r = a.alloc(layout(1, 1));
            assert_eq!(r, q.wrapping_add(2), "the tail is handed out again, once");
            a.dealloc(r, layout(1, 1));
            a.dealloc(q, layout(2, 8));
            a.dealloc(p, layout(1, 1));
        }
    }

    #[test]
    fn zeroed_allocations_are_zero_wherever_they_come_from() {
        let a = FirstArena::<System, 32>::new(System, Box::leak(Box::new(Arena::new())));
        // SAFETY: as above.
        unsafe {
            let p = a.alloc(layout(16, 1));
            p.write_bytes(0xff, 16);
            // The arena's bytes after a shrink once held data: zeroed all the same.
            let p = a.realloc(p, layout(16, 1), 1);
            let z = a.alloc_zeroed(layout(8, 1));
            assert!(a.holds(z));
            assert!(std::slice::from_raw_parts(z, 8).iter().all(|&b| b == 0));
            let big = a.alloc_zeroed(layout(100, 1));
            assert!(!a.holds(big));
            assert!(std::slice::from_raw_parts(big, 100).iter().all(|&b| b == 0));
            a.dealloc(big, layout(100, 1));
            a.dealloc(z, layout(8, 1));
            a.dealloc(p, layout(1, 1));
        }
    }

    #[test]
    fn an_arena_given_to_two_is_used_by_the_first_only() {
        let arena: &'static Arena<64> = Box::leak(Box::new(Arena::new()));
        let first = FirstArena::<System, 64>::new(System, arena);
        let second = FirstArena::<System, 64>::new(System, arena);
        // SAFETY: as above.
        unsafe {
            let p = first.alloc(layout(8, 1));
            assert!(first.holds(p));
            let q = second.alloc(layout(8, 1));
            assert!(!second.holds(q), "the second finds the arena claimed");
            assert_eq!(second.top.get(), 64);
            let r = first.alloc(layout(8, 1));
            assert!(first.holds(r), "the first goes on with it");
            first.dealloc(r, layout(8, 1));
            second.dealloc(q, layout(8, 1));
            first.dealloc(p, layout(8, 1));
        }
    }

    #[test]
    fn a_pointer_just_past_the_arena_is_not_its() {
        let a = FirstArena::<System, 16>::new(System, Box::leak(Box::new(Arena::new())));
        let base = a.base();
        assert!(a.holds(base));
        assert!(a.holds(base.wrapping_add(15)));
        assert!(!a.holds(base.wrapping_add(16)));
        assert!(!a.holds(base.wrapping_sub(1)));
    }
}
