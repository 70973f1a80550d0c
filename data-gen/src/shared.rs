//! Tensors made once and shared while anyone holds them: every input set of a run uses the same
//! embedding tables (gigabytes each at `full`), so a table is generated once per process and the
//! sets hold references to its bytes ([`crate::tensor::Bytes`]). The memo keeps only weak
//! references: a table nobody holds any longer is freed, and made again if asked for again.
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, Weak};

use crate::tensor::{Bytes, DType, HostTensor};

/// What the memo keeps of a tensor: its dtype, shape and a weak reference to its bytes.
type Entry = (DType, Vec<usize>, Weak<Vec<u8>>);

fn memo() -> &'static Mutex<HashMap<String, Entry>> {
    static MEMO: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// The tensor made under `key` while any holder is left, else `make()`'s (then remembered).
/// `key` must name everything the tensor depends on (problem, tensor, shape, seed): two calls
/// with one key must make the same tensor. Two threads asking at once may both make it (no
/// lock is held while it is made: a maker running rayon work could otherwise be handed, on
/// the same thread, a task that waits for that lock), but the first made is the one kept and
/// returned to both: every holder shares one copy. A caller that prepares sets in parallel
/// makes one first (`host::evaluate::inputs::host_sides`), so the rest do not make it again.
pub fn shared_tensor<E>(
    key: &str,
    make: impl FnOnce() -> Result<HostTensor, E>,
) -> Result<HostTensor, E> {
    if let Some(t) = lookup(key) {
        return Ok(t);
    }
    let t = make()?;
    let mut memo = memo().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(first) = found(&memo, key) {
        return Ok(first);
    }
    memo.retain(|_, (_, _, weak)| weak.strong_count() > 0);
    memo.insert(
        key.to_string(),
        (t.dtype, t.shape.clone(), t.bytes.downgrade()),
    );
    Ok(t)
}

/// The key `bytes` were made under by [`shared_tensor`], if they are a shared tensor's (and not
/// a copy written since).
pub fn shared_key(bytes: &Bytes) -> Option<String> {
    let memo = memo().lock().unwrap_or_else(|e| e.into_inner());
    memo.iter()
        .find(|(_, (_, _, weak))| bytes.is(weak))
        .map(|(key, _)| key.clone())
}

fn lookup(key: &str) -> Option<HostTensor> {
    found(&memo().lock().unwrap_or_else(|e| e.into_inner()), key)
}

/// The live tensor of `key` in `memo`.
fn found(memo: &HashMap<String, Entry>, key: &str) -> Option<HostTensor> {
    let (dtype, shape, weak) = memo.get(key)?;
    let bytes = Bytes::upgrade(weak)?;
    Some(HostTensor {
        dtype: *dtype,
        shape: shape.clone(),
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_making_one_key_at_once_all_get_the_first_made() {
        let barrier = std::sync::Barrier::new(4);
        let made: Vec<HostTensor> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        shared_tensor("shared-test/race", || {
                            // Every thread misses the memo before any has made it.
                            barrier.wait();
                            HostTensor::from_f32(vec![1], vec![i as f32]).map_err(|_| ())
                        })
                        .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            made.iter().all(|t| t.bytes.same_as(&made[0].bytes)),
            "one copy for all"
        );
        assert_eq!(
            shared_key(&made[0].bytes).as_deref(),
            Some("shared-test/race")
        );
    }

    fn make(calls: &mut usize, v: f32) -> Result<HostTensor, ()> {
        *calls += 1;
        Ok(HostTensor::from_f32(vec![2], vec![v, v]).unwrap())
    }

    #[test]
    fn one_tensor_per_key_while_held_then_made_again() {
        let mut calls = 0;
        let a = shared_tensor("shared-test/a", || make(&mut calls, 1.0)).unwrap();
        let b = shared_tensor("shared-test/a", || make(&mut calls, 2.0)).unwrap();
        assert_eq!(calls, 1, "made once while held");
        assert_eq!(shared_key(&b.bytes).as_deref(), Some("shared-test/a"));
        assert!(a.bytes.same_as(&b.bytes));
        assert_eq!(b.to_f32_vec(), vec![1.0, 1.0]);
        let other = shared_tensor("shared-test/b", || make(&mut calls, 3.0)).unwrap();
        assert!(!other.bytes.same_as(&a.bytes));
        drop((a, b));
        let c = shared_tensor("shared-test/a", || make(&mut calls, 4.0)).unwrap();
        assert_eq!(calls, 3, "freed once nobody held it, then made again");
        assert_eq!(c.to_f32_vec(), vec![4.0, 4.0]);
    }

    #[test]
    fn writing_a_shared_tensor_copies_it_first() {
        let mut calls = 0;
        let a = shared_tensor("shared-test/cow", || make(&mut calls, 1.0)).unwrap();
        let mut b = shared_tensor("shared-test/cow", || make(&mut calls, 1.0)).unwrap();
        b.bytes[0] = 0xFF;
        assert!(!a.bytes.same_as(&b.bytes));
        assert_eq!(
            a.to_f32_vec(),
            vec![1.0, 1.0],
            "the other holder sees no change"
        );
        assert_eq!(
            shared_key(&b.bytes),
            None,
            "a written copy is no longer the shared tensor"
        );
    }
}
