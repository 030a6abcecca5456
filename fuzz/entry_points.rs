//! The fuzz entry points, shared by the cargo-fuzz targets (fuzz/fuzz_targets/*.rs) and by
//! tests/fuzz_regressions.rs, which replays saved inputs through the very same functions
//! under plain `cargo test`.
//!
//! Each entry point must never panic on any input; where a parser succeeds it also checks a
//! property of the result (round trips, invariants of derived figures), by panicking.

#![allow(dead_code)]

use agentx_proto::pdu::{self, DecodeErrorKind, Header, Pdu, HEADER_LEN, MAX_PAYLOAD};
use memstat_agentx::config::RawSettings;
use memstat_agentx::memstat::{
    allocinfo, arcstats, fixture, linux, malloc, meminfo, uma, MemoryType,
};
use std::path::Path;

/// The targets by name, for the regression test and scripts/fuzz.
pub const TARGETS: [&str; 9] = [
    "agentx_pdu",
    "slabinfo",
    "meminfo",
    "arcstats",
    "allocinfo",
    "uma_stream",
    "malloc_stream",
    "fixture_json",
    "config_toml",
];

/// Runs the entry point called `target` on `data`.
pub fn run(target: &str, data: &[u8]) {
    match target {
        "agentx_pdu" => agentx_pdu(data),
        "slabinfo" => slabinfo(data),
        "meminfo" => meminfo(data),
        "arcstats" => arcstats(data),
        "allocinfo" => allocinfo(data),
        "uma_stream" => uma_stream(data),
        "malloc_stream" => malloc_stream(data),
        "fixture_json" => fixture_json(data),
        "config_toml" => config_toml(data),
        other => panic!("unknown fuzz target {other:?}"),
    }
}

/// `Header::decode` and `Pdu::decode` on the raw bytes, and on a copy whose framing is made
/// consistent (version 1, `payload_length` = the bytes that follow, rounded down to a multiple
/// of 4 and capped at 64 KiB) so that the payload decoder is reached for most inputs. Every
/// PDU that decodes must survive `encode` and decode to the same value.
pub fn agentx_pdu(data: &[u8]) {
    decode_one(data);
    if data.len() >= HEADER_LEN {
        let payload = ((data.len() - HEADER_LEN) & !3).min(MAX_PAYLOAD);
        let mut frame = data[..HEADER_LEN + payload].to_vec();
        frame[0] = pdu::VERSION;
        let len = payload as u32;
        let bytes = if frame[2] & pdu::flags::NETWORK_BYTE_ORDER != 0 {
            len.to_be_bytes()
        } else {
            len.to_le_bytes()
        };
        frame[16..20].copy_from_slice(&bytes);
        decode_one(&frame);
    }
}

fn decode_one(frame: &[u8]) {
    let header = Header::decode(frame);
    match &header {
        Ok(h) => {
            assert_eq!(h.version, pdu::VERSION);
            assert!(h.payload_length as usize <= MAX_PAYLOAD);
            assert_eq!(h.payload_length % 4, 0);
        }
        Err(e) => {
            assert!(e.header.is_none() && e.fatal(), "{e:?}");
            let _ = e.to_string();
        }
    }
    match Pdu::decode(frame) {
        Ok(p) => {
            let h = header.expect("a PDU that decodes has a valid header");
            assert_eq!(h.frame_len(), frame.len());
            assert_eq!(h.pdu_type, p.pdu_type());
            assert_eq!(
                p.flags & (pdu::flags::NETWORK_BYTE_ORDER | pdu::flags::NON_DEFAULT_CONTEXT),
                0
            );
            let mut out = Vec::new();
            p.encode(&mut out);
            // encode() leaves the 64 KiB check to callers; OIDs decoded with a prefix are
            // re-encoded without one and may grow past it.
            if out.len() <= HEADER_LEN + MAX_PAYLOAD {
                assert_eq!(Pdu::decode(&out).as_ref(), Ok(&p), "re-encoded: {out:02x?}");
                let mut again = Vec::new();
                p.encode(&mut again);
                assert_eq!(out, again, "encoding is deterministic");
            }
        }
        Err(e) => {
            let _ = e.to_string();
            if header.is_err() {
                assert!(e.header.is_none());
            } else {
                assert!(e.header.is_some(), "{e:?}");
            }
            // The offset points into the payload; for FrameLength it is the length received.
            if let (Some(h), false) = (e.header, e.kind == DecodeErrorKind::FrameLength) {
                assert!(e.offset <= h.payload_length as usize, "{e:?}");
            }
        }
    }
}

/// `linux::parse` on the input as UTF-8 (the reader rejects other bytes before parsing).
/// `memstat::meminfo::parse` on the raw bytes: each figure is one of the kinds' and a whole
/// number of KiB (or saturated), no more figures than lines; errors name the file and a line.
pub fn meminfo(data: &[u8]) {
    match meminfo::parse(data, "fuzz-meminfo") {
        Ok(figures) => {
            let lines = data.split(|&b| b == b'\n').count();
            assert!(figures.len() <= lines);
            for (k, v) in &figures {
                assert!(meminfo::KINDS.iter().any(|kind| kind.figure == k), "{k}");
                assert!(v % 1024 == 0 || *v == u64::MAX, "{k} = {v}");
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz-meminfo") && m.contains("line "), "{m}");
        }
    }
}

/// `memstat::arcstats::parse` on the raw bytes: every figure is `arcstats.` and a name
/// without whitespace, no more figures than lines; errors name the file and a line.
pub fn arcstats(data: &[u8]) {
    match arcstats::parse(data, "fuzz-arcstats") {
        Ok(figures) => {
            let lines = data.split(|&b| b == b'\n').count();
            assert!(figures.len() <= lines);
            for k in figures.keys() {
                let name = k.strip_prefix("arcstats.").expect("the source's prefix");
                assert!(
                    !name.is_empty() && !name.contains(char::is_whitespace),
                    "{k:?}"
                );
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz-arcstats") && m.contains("line "), "{m}");
        }
    }
}

/// `memstat::allocinfo::parse` on the raw bytes: a version only for a non-empty input, and
/// of a major version the reader knows; no more rows than lines and no more sites than rows,
/// every row in exactly one site; every site of a distinct tag, with a file, a function and a
/// module (or none) without spaces, a module without brackets; errors name the file and a
/// line.
pub fn allocinfo(data: &[u8]) {
    match allocinfo::parse(data, "fuzz-allocinfo") {
        Ok(a) => {
            assert_eq!(a.version.is_none(), data.is_empty(), "{:?}", a.version);
            if let Some(v) = a.version {
                assert!(allocinfo::MAJORS.contains(&v.major), "{v:?}");
            }
            let lines = data.split(|&b| b == b'\n').count();
            assert!(a.rows <= lines && a.sites.len() <= a.rows);
            let summed: usize = a.sites.iter().map(|s| s.rows as usize).sum();
            assert_eq!(summed, a.rows);
            let mut keys = std::collections::HashSet::new();
            for s in &a.sites {
                assert!(s.rows >= 1);
                assert!(!s.file.is_empty() && !s.function.is_empty(), "{s:?}");
                for name in [&s.file, &s.module, &s.function] {
                    assert!(!name.contains([' ', '\n']), "{s:?}");
                }
                assert!(!s.module.contains(['[', ']']), "{s:?}");
                assert!(
                    keys.insert((&s.file, s.line, &s.module, &s.function)),
                    "a tag in two sites: {s:?}"
                );
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz-allocinfo") && m.contains("line "), "{m}");
        }
    }
}

pub fn slabinfo(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match linux::parse(text, "fuzz-slabinfo", 4096) {
        Ok(types) => {
            assert!(types.len() <= text.lines().count());
            for t in &types {
                let (active, total, size) = (
                    t.in_use_count.unwrap(),
                    t.total_count.unwrap(),
                    t.size.unwrap(),
                );
                assert_eq!(t.free_count, Some(total.saturating_sub(active)));
                assert_eq!(t.in_use_bytes, Some(active.saturating_mul(size)));
                assert!(t.slab_bytes.is_some());
                assert!(!t.name.is_empty() && !t.name.contains(|c: char| c.is_ascii_whitespace()));
                assert!(t.per_cpu.is_empty());
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz-slabinfo"), "{m}");
        }
    }
}

/// Splits the input into `kern.smp.maxid` (the first 4 bytes, little-endian) and the stream.
fn maxid_and_stream(data: &[u8]) -> Option<(u32, &[u8])> {
    let (id, stream) = data.split_at_checked(4)?;
    Some((u32::from_le_bytes(id.try_into().ok()?), stream))
}

fn check_stream(
    result: Result<Vec<MemoryType>, memstat_agentx::memstat::SourceError>,
    stream: &[u8],
    maxid: u32,
    what: &str,
) {
    match result {
        Ok(types) => {
            // The header is valid (16 bytes: version, maxcpus, count, pad).
            let maxcpus = u32::from_ne_bytes(stream[4..8].try_into().unwrap());
            let count = u32::from_ne_bytes(stream[8..12].try_into().unwrap());
            assert_eq!(types.len(), count as usize);
            let exposed = (u64::from(maxid) + 1).min(u64::from(maxcpus)) as usize;
            for t in &types {
                assert_eq!(t.per_cpu.len(), exposed, "{t:?}");
                for (i, c) in t.per_cpu.iter().enumerate() {
                    assert_eq!(c.cpu as usize, i);
                }
                let (a, f) = (t.allocs.unwrap(), t.frees.unwrap());
                assert_eq!(t.in_use_count, Some(a.saturating_sub(f)));
            }
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains(what), "{m}");
        }
    }
}

/// `uma::parse_uma` with `maxid` taken from the input.
pub fn uma_stream(data: &[u8]) {
    let Some((maxid, stream)) = maxid_and_stream(data) else {
        return;
    };
    check_stream(uma::parse_uma(stream, maxid), stream, maxid, uma::WHAT);
}

/// `malloc::parse_malloc` with `maxid` taken from the input.
pub fn malloc_stream(data: &[u8]) {
    let Some((maxid, stream)) = maxid_and_stream(data) else {
        return;
    };
    check_stream(
        malloc::parse_malloc(stream, maxid),
        stream,
        maxid,
        malloc::WHAT,
    );
}

/// `fixture::parse`; a fixture that parses must print (`dump --format json`) and parse back
/// to the same snapshot.
pub fn fixture_json(data: &[u8]) {
    match fixture::parse(data, "fuzz.json") {
        Ok(s) => {
            let j = fixture::to_json(&s);
            let back = fixture::parse(j.as_bytes(), "again.json")
                .unwrap_or_else(|e| panic!("printed fixture does not parse: {e}\n{j}"));
            assert_eq!(back, s);
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz.json") && m.contains("line "), "{m}");
        }
    }
}

/// `RawSettings::from_toml_str`, then the one conversion; an accepted configuration must
/// render (`check-config`) to TOML that parses back to the same settings.
pub fn config_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    let parse = |t: &str| {
        let raw = RawSettings::from_toml_str(t, path)?;
        raw.convert().map(|c| (c, raw))
    };
    match parse(text) {
        Ok((c, raw)) => {
            let r = raw.render();
            let back =
                parse(&r).unwrap_or_else(|e| panic!("rendered config does not parse: {e}\n{r}"));
            assert_eq!(back.0, c, "{r}");
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz.toml"), "{m}");
        }
    }
}
