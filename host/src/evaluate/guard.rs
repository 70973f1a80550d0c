//! Guard regions (docs/design.md §6): every buffer a kernel can reach (inputs, outputs, in-out tensors,
//! scratch) is the middle of a larger allocation, with [`GUARD_BYTES`] before and after it
//! filled with a pattern drawn at random by each worker process. After every checked run, and
//! after the timed runs of each candidate, the guards of every buffer that run could reach are
//! fingerprinted on the device; a changed guard is an `out_of_bounds_write` naming the buffer,
//! the side and the first changed byte. A kernel cannot know the pattern in advance, and the
//! guards are written only when the buffer is allocated, so a write during any timed run stays
//! visible until the check after them.
use crate::backend::{host_fingerprint, Backend, BackendError, Buffer};
use std::sync::OnceLock;

/// Bytes of each guard region.
pub(super) const GUARD_BYTES: usize = 64 << 10;

/// The guard after a buffer begins at its end rounded up to this (what a vector store of its
/// last element may touch is the buffer's).
const END_ALIGN: usize = 16;

/// This process's guard pattern and the fingerprint of a guard region holding it.
struct Pattern {
    bytes: [u8; 16],
    fingerprint: u64,
}

fn pattern() -> &'static Pattern {
    static PATTERN: OnceLock<Pattern> = OnceLock::new();
    PATTERN.get_or_init(|| {
        // Bytes 3..=252: a stray 0, 1, 2 or 0xFF (the commonest values written) always shows.
        let bytes: [u8; 16] = rand::random::<[u8; 16]>().map(|b| 3 + b % 250);
        let guard: Vec<u8> = bytes.iter().copied().cycle().take(GUARD_BYTES).collect();
        Pattern {
            bytes,
            fingerprint: host_fingerprint(&guard),
        }
    })
}

/// Allocates a buffer of `bytes` between two guard regions, and fills the guards.
pub(super) fn alloc(backend: &mut dyn Backend, bytes: usize) -> Result<Buffer, BackendError> {
    let body = bytes.next_multiple_of(END_ALIGN);
    let whole = backend.alloc(2 * GUARD_BYTES + body)?;
    let buffer = whole
        .part(GUARD_BYTES, bytes)
        .expect("inside the allocation");
    let filled = regions(&buffer).map(|(_, guard)| backend.fill(&guard, &pattern().bytes));
    if let Some(Err(e)) = filled.into_iter().find(|r| r.is_err()) {
        backend.free(whole);
        return Err(e);
    }
    Ok(buffer)
}

/// The guard regions of a buffer from [`alloc`]: before it, and after its rounded-up end.
fn regions(buffer: &Buffer) -> [(&'static str, Buffer); 2] {
    let at = |offset| Buffer {
        id: buffer.id,
        offset,
        bytes: GUARD_BYTES,
    };
    let after = buffer.offset + buffer.bytes.next_multiple_of(END_ALIGN);
    [
        ("before", at(buffer.offset - GUARD_BYTES)),
        ("after", at(after)),
    ]
}

/// The bytes between the end of a buffer from [`alloc`] and its guard after it (up to 15: the
/// end rounded up for vector accesses), as a buffer; `None` when there are none. A kernel owns
/// them as it owns the buffer, and nothing checks them, so they are cleared before every
/// execution of a candidate: no state survives there either.
pub(super) fn slack(buffer: &Buffer) -> Option<Buffer> {
    let end = buffer.bytes.next_multiple_of(END_ALIGN);
    (is_guarded(buffer) && end > buffer.bytes).then(|| Buffer {
        id: buffer.id,
        offset: buffer.offset + buffer.bytes,
        bytes: end - buffer.bytes,
    })
}

/// Zeroes the [`slack`] of each of `buffers`.
pub(super) fn clear_slack<'a>(
    backend: &mut dyn Backend,
    buffers: impl IntoIterator<Item = &'a Buffer>,
) -> Result<(), BackendError> {
    for slack in buffers.into_iter().filter_map(slack) {
        backend.fill(&slack, &[0])?;
    }
    Ok(())
}

/// Whether `buffer` came from [`alloc`] (the only buffers with guards).
fn is_guarded(buffer: &Buffer) -> bool {
    buffer.offset == GUARD_BYTES
}

/// Verifies the guards of `buffers` (name and buffer, of side `side`): the message of the first
/// changed one (`None`: all intact). Every changed guard gets its pattern back, so that the
/// next run is judged on its own writes. Buffers without guards are skipped.
pub(super) fn verify<'a>(
    backend: &mut dyn Backend,
    side: &str,
    buffers: impl IntoIterator<Item = (&'a str, &'a Buffer)>,
) -> Result<Option<String>, BackendError> {
    let want = pattern().fingerprint;
    let mut first = None;
    for (name, buffer) in buffers {
        if !is_guarded(buffer) {
            continue;
        }
        for (where_, guard) in regions(buffer) {
            if backend.fingerprint(&guard)? == want {
                continue;
            }
            let msg = describe(backend, side, name, buffer, where_, &guard)?;
            backend.fill(&guard, &pattern().bytes)?;
            first.get_or_insert(msg);
        }
    }
    Ok(first)
}

/// The message of a changed guard region `guard` (`where_` buffer `name` of `side`): the
/// first changed byte, copied back to find it.
fn describe(
    backend: &mut dyn Backend,
    side: &str,
    name: &str,
    buffer: &Buffer,
    where_: &str,
    guard: &Buffer,
) -> Result<String, BackendError> {
    let now = backend.download(guard)?;
    let expected = &pattern().bytes;
    let first = now
        .iter()
        .enumerate()
        .position(|(i, b)| *b != expected[i % expected.len()])
        .unwrap_or(0);
    let at = if where_ == "before" {
        format!("{} bytes before its start", GUARD_BYTES - first)
    } else {
        let past = first + buffer.bytes.next_multiple_of(END_ALIGN) - buffer.bytes;
        format!("{past} bytes past its end")
    };
    Ok(format!(
        "wrote outside {side} buffer `{name}` ({} bytes): the guard region {where_} it changed, \
         first at {at}",
        buffer.bytes
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::EmuBackend;

    #[test]
    fn a_write_into_either_guard_is_found_with_its_offset_and_the_buffer_is_untouched() {
        let mut backend = EmuBackend::new();
        let buf = alloc(&mut backend, 1000).unwrap();
        assert_eq!(backend.address(&buf) % 16, 0);
        backend.upload(&buf, &[7u8; 1000]).unwrap();
        assert_eq!(backend.download(&buf).unwrap(), vec![7u8; 1000]);
        let named = |b: &Buffer| vec![("out", *b)];
        let check = |backend: &mut EmuBackend, b: &Buffer| {
            let list = named(b);
            verify(
                backend,
                "the candidate's",
                list.iter().map(|(n, b)| (*n, b)),
            )
            .unwrap()
        };
        assert_eq!(
            check(&mut backend, &buf),
            None,
            "writing the buffer itself is fine"
        );
        // The bytes up to the 16-byte rounding belong to the buffer.
        let slack = buf.part(0, 1000).unwrap();
        let mut whole = Buffer {
            offset: slack.offset,
            bytes: 1008,
            ..slack
        };
        backend.upload(&whole, &[9u8; 1008]).unwrap();
        assert_eq!(check(&mut backend, &buf), None);
        // One byte past the rounded end, then one byte before the start.
        whole.bytes = 1009;
        backend.upload(&whole, &[0xFFu8; 1009]).unwrap(); // 0xFF is never a pattern byte
        let msg = check(&mut backend, &buf).unwrap();
        assert!(
            msg.contains("buffer `out` (1000 bytes)")
                && msg.contains("after it")
                && msg.contains("first at 8 bytes past its end"),
            "{msg}"
        );
        let fresh = alloc(&mut backend, 64).unwrap();
        let before = Buffer {
            offset: fresh.offset - 3,
            bytes: 1,
            ..fresh
        };
        backend
            .upload(&before, &[0x5A ^ pattern().bytes[(GUARD_BYTES - 3) % 16]])
            .unwrap();
        let msg = check(&mut backend, &fresh).unwrap();
        assert!(
            msg.contains("before it") && msg.contains("first at 3 bytes before its start"),
            "{msg}"
        );
        // A buffer without guards is not checked (and not misread).
        let plain = backend.alloc(64).unwrap();
        assert_eq!(check(&mut backend, &plain), None);
    }

    #[test]
    fn the_slack_after_a_buffer_is_its_rounding_and_is_cleared() {
        let mut backend = EmuBackend::new();
        let buf = alloc(&mut backend, 1001).unwrap();
        let slack = slack(&buf).expect("1001 rounds up to 1008");
        assert_eq!((slack.offset, slack.bytes), (buf.offset + 1001, 7));
        assert!(slack_of_whole_multiple_is_none(&mut backend));
        // A kernel's leftovers in the slack are gone, and the guard is untouched.
        backend.fill(&slack, &[0x5A]).unwrap();
        clear_slack(&mut backend, [&buf]).unwrap();
        assert_eq!(backend.download(&slack).unwrap(), vec![0; 7]);
        assert_eq!(verify(&mut backend, "test", [("b", &buf)]).unwrap(), None);
    }

    fn slack_of_whole_multiple_is_none(backend: &mut EmuBackend) -> bool {
        let buf = alloc(backend, 1008).unwrap();
        slack(&buf).is_none()
    }
}
