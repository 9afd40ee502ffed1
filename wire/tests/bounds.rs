//! The version-4 bodies' bounds, enforced while decoding: a body over a bound is refused as
//! `Malformed` before anything is allocated for what it states, and one at the bound reads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use lintel_wire::{
    decode_body, encode_frame, DecodeError, Frame, FrameKind, Progress, ResumeSession, Session,
    SessionResumed, DEFAULT_MAX_FRAME_LEN, PROTOCOL_VERSION,
};

/// Counts this thread's live and peak heap bytes, so that parallel tests do not interfere.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note_alloc(size: usize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + size);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

fn note_free(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(size)));
}

// SAFETY: every call is passed on to the system allocator unchanged; only counters are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_free(layout.size());
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_free(layout.size());
        note_alloc(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Most bytes a refused body may allocate while decoding: a frame and an error, never the
/// list or bytes it states.
const REFUSAL_ALLOCATES_AT_MOST: usize = 8 * 1024;

/// Decodes `body`, returning the result and the peak heap bytes allocated meanwhile.
fn decode_measured(body: &[u8]) -> (Result<Frame, DecodeError>, usize) {
    let live = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(live));
    let decoded = decode_body(body);
    let peak = PEAK.with(Cell::get) - live;
    (decoded, peak)
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn kind(kind: FrameKind) -> Vec<u8> {
    let mut body = Vec::new();
    varint(kind.discriminant().into(), &mut body);
    body
}

/// `count` entries of `0u64`, each one byte, after their count.
fn zeros(count: u64, out: &mut Vec<u8>) {
    varint(count, out);
    out.resize(out.len() + usize::try_from(count).expect("fits"), 0);
}

fn bytes(len: usize, out: &mut Vec<u8>) {
    varint(len as u64, out);
    out.resize(out.len() + len, 7);
}

fn session(token_len: usize) -> Vec<u8> {
    let mut body = kind(FrameKind::Session);
    bytes(token_len, &mut body);
    varint(30_000, &mut body);
    body
}

fn resume(token_len: usize, holding: u64) -> Vec<u8> {
    let mut body = kind(FrameKind::ResumeSession);
    bytes(token_len, &mut body);
    zeros(holding, &mut body);
    body
}

fn resumed(attached: u64, unknown: u64) -> Vec<u8> {
    let mut body = kind(FrameKind::SessionResumed);
    varint(9, &mut body);
    zeros(attached, &mut body);
    zeros(unknown, &mut body);
    body
}

fn progress(details_len: usize) -> Vec<u8> {
    let mut body = kind(FrameKind::Progress);
    varint(5, &mut body);
    bytes(details_len, &mut body);
    body
}

#[track_caller]
fn assert_refused(body: &[u8], expected: FrameKind) {
    let (decoded, peak) = decode_measured(body);
    match decoded {
        Err(DecodeError::Malformed { kind, .. }) => assert_eq!(kind, expected),
        other => panic!("a {expected} body over its bound decoded as {other:?}"),
    }
    assert!(
        peak <= REFUSAL_ALLOCATES_AT_MOST,
        "refusing a {}-byte {expected} body allocated {peak} bytes",
        body.len()
    );
}

#[track_caller]
fn assert_reads(body: &[u8], expected: FrameKind) -> Frame {
    match decode_body(body) {
        Ok(frame) => {
            assert_eq!(frame.kind_at(PROTOCOL_VERSION).ok(), Some(expected));
            frame
        }
        Err(err) => panic!("a {expected} body within its bounds is refused: {err}"),
    }
}

#[test]
fn a_session_token_is_16_to_64_bytes() {
    for len in [0, 1, 15, 65, 1000] {
        assert_refused(&session(len), FrameKind::Session);
        assert_refused(&resume(len, 0), FrameKind::ResumeSession);
    }
    for len in [16, 40, 64] {
        assert_reads(&session(len), FrameKind::Session);
        assert_reads(&resume(len, 0), FrameKind::ResumeSession);
    }
}

#[test]
fn a_resume_holds_at_most_65536_correlations() {
    let max = ResumeSession::MAX_HOLDING as u64;
    assert_refused(&resume(16, max + 1), FrameKind::ResumeSession);
    match assert_reads(&resume(16, max), FrameKind::ResumeSession) {
        Frame::ResumeSession(resume) => assert_eq!(resume.holding.len() as u64, max),
        other => panic!("read as {other:?}"),
    }
}

#[test]
fn an_answer_to_a_resume_lists_at_most_65536_of_each() {
    let max = ResumeSession::MAX_HOLDING as u64;
    assert_refused(&resumed(max + 1, 0), FrameKind::SessionResumed);
    assert_refused(&resumed(0, max + 1), FrameKind::SessionResumed);
    assert_reads(&resumed(max, max), FrameKind::SessionResumed);
}

#[test]
fn progress_details_are_at_most_4096_bytes() {
    assert_refused(&progress(Progress::MAX_DETAILS + 1), FrameKind::Progress);
    assert_refused(&progress(1 << 20), FrameKind::Progress);
    assert_reads(&progress(Progress::MAX_DETAILS), FrameKind::Progress);
    assert_reads(&progress(0), FrameKind::Progress);
}

#[test]
fn a_count_stated_without_its_entries_reserves_nothing_for_them() {
    // Far over the bound, then just at it: neither is followed by its entries.
    for stated in [u64::from(u32::MAX), ResumeSession::MAX_HOLDING as u64] {
        let mut body = kind(FrameKind::ResumeSession);
        bytes(16, &mut body);
        varint(stated, &mut body);
        assert_refused(&body, FrameKind::ResumeSession);
    }
}

#[test]
fn a_body_over_a_bound_is_not_written() {
    let frames = [
        Frame::from(Session {
            token: vec![1; 65].into(),
            resume_grace_ms: 1,
        }),
        Frame::from(ResumeSession {
            token: vec![1; 15].into(),
            holding: Vec::new(),
        }),
        Frame::from(ResumeSession {
            token: vec![1; 16].into(),
            holding: vec![0; ResumeSession::MAX_HOLDING + 1],
        }),
        Frame::from(SessionResumed {
            worker_id: 1,
            attached: Vec::new(),
            unknown: vec![0; ResumeSession::MAX_HOLDING + 1],
        }),
        Frame::from(Progress {
            correlation: 1,
            details: vec![0; Progress::MAX_DETAILS + 1].into(),
        }),
    ];
    for frame in &frames {
        let mut buf = bytes::BytesMut::new();
        let written = encode_frame(frame, PROTOCOL_VERSION, &mut buf, DEFAULT_MAX_FRAME_LEN);
        assert!(
            written.is_err(),
            "{} over its bound was written",
            frame.name()
        );
        assert!(buf.is_empty());
    }
}
