//! Pushing into a `Vec` that starts empty without calling `Vec`'s growth. A new isolate compiles each wasm function
//! on its first call, and the first push into an empty `Vec` calls `RawVec::grow_one` and `finish_grow`, a pair for
//! each size of element: a first visit's few pushes (the keys it wants, its reads' marks, the records it holds, a
//! blocklist's domains) made it compile five such functions (BENCHMARKS.md, issue 28). `Vec::with_capacity` is
//! inlined into its caller as one allocation, so a `Vec` given its room that way before the first push compiles
//! none of them until it outgrows it.

/// Pushes `item` onto `vec`, first giving an empty `vec` with no room of its own room for `room` items ([`give`]).
#[inline]
pub fn push<T>(vec: &mut Vec<T>, item: T, room: usize) {
    give(vec, room);
    vec.push(item);
}

/// Gives `vec` room for `room` items if it has no room at all, as `Vec::with_capacity` would: for several pushes
/// that follow, one allocation and no growth.
#[inline]
pub fn give<T>(vec: &mut Vec<T>, room: usize) {
    if vec.capacity() == 0 {
        // Forgotten, not dropped: a `Vec` with no room holds no allocation and no items (a zero-sized `T` always
        // has room), so nothing is lost, where its drop would compile a loop over `T`'s drop for nothing.
        std::mem::forget(std::mem::replace(vec, Vec::with_capacity(room)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_vec_gets_its_room_then_grows_as_any() {
        let mut v = Vec::new();
        push(&mut v, 1, 3);
        assert_eq!((v.as_slice(), v.capacity()), (&[1][..], 3));
        push(&mut v, 2, 3);
        push(&mut v, 3, 3);
        assert_eq!(v.capacity(), 3);
        push(&mut v, 4, 3);
        assert_eq!(v, [1, 2, 3, 4]);
        assert!(v.capacity() >= 4);
    }

    #[test]
    fn a_vec_with_room_or_items_is_left_as_it_is() {
        let mut v = Vec::with_capacity(8);
        push(&mut v, "a", 2);
        assert_eq!(v.capacity(), 8);
        let mut w = vec!["x"];
        push(&mut w, "y", 1);
        assert_eq!(w, ["x", "y"]);
        // A vec emptied but keeping its allocation keeps it.
        let mut u: Vec<u8> = Vec::with_capacity(5);
        u.push(1);
        u.clear();
        push(&mut u, 2, 1);
        assert_eq!((u.as_slice(), u.capacity()), (&[2][..], 5));
    }

    #[test]
    fn room_is_given_once_for_the_pushes_that_follow() {
        let mut v = Vec::new();
        give(&mut v, 3);
        assert_eq!((v.len(), v.capacity()), (0, 3));
        v.extend(["a", "b", "c"]);
        give(&mut v, 10);
        assert_eq!(v.capacity(), 3);
    }

    #[test]
    fn zero_room_still_pushes() {
        let mut v = Vec::new();
        push(&mut v, 'z', 0);
        assert_eq!(v, ['z']);
    }
}
