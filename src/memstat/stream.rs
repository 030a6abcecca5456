//! Byte-level helpers shared by the `vm.zone_stats` and `kern.malloc_stats` parsers.
//!
//! Fields are read with constant offsets from records whose length has already been checked,
//! as fixed-size arrays (`&[u8; N]`), so a field read cannot go out of bounds on any input.

use super::SourceError;

/// Both streams start with the same 16-byte header: version, maxcpus, count, pad.
pub(crate) const HEADER_LEN: usize = 16;
/// The only stream version there has ever been (`UMA_STREAM_VERSION`,
/// `MALLOC_TYPE_STREAM_VERSION`).
pub(crate) const VERSION: u32 = 1;
/// No FreeBSD port has MAXCPU anywhere near this; larger values mean a corrupt header,
/// and the cap keeps `maxcpus × 64` far from overflow on 32-bit hosts.
pub(crate) const MAX_CPUS: u32 = 65536;
/// Both name fields are char[32] (`UTH_MAX_NAME`, `MALLOC_MAX_NAME`).
pub(crate) const NAME_LEN: usize = 32;
/// Every per-CPU record (`uma_percpu_stat`, `malloc_type_stats`) is 64 bytes.
pub(crate) const PERCPU_LEN: usize = 64;

/// What the stream header promises, checked against the buffer.
#[derive(Debug)]
pub(crate) struct Layout {
    pub maxcpus: u32,
    pub count: u32,
    /// Type header plus `maxcpus` per-CPU records.
    pub record_len: usize,
}

/// Field and unit names for error messages: ("ush", "zone") or ("mtsh", "type").
pub(crate) struct Names {
    pub what: &'static str,
    pub prefix: &'static str,
    pub unit: &'static str,
}

pub(crate) fn malformed(
    names: &Names,
    location: String,
    field: &str,
    message: String,
) -> SourceError {
    SourceError::Malformed {
        what: names.what.into(),
        location,
        field: field.into(),
        message,
    }
}

/// A fixed-size view of `N` bytes at `off`, or `None` if the buffer is too short.
pub(crate) fn array_at<const N: usize>(buf: &[u8], off: usize) -> Option<&[u8; N]> {
    buf.get(off..)?.get(..N)?.try_into().ok()
}

pub(crate) fn u32_at<const N: usize>(rec: &[u8; N], off: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&rec[off..off + 4]);
    u32::from_ne_bytes(b)
}

pub(crate) fn u64_at<const N: usize>(rec: &[u8; N], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&rec[off..off + 8]);
    u64::from_ne_bytes(b)
}

/// Validates the stream header and that the buffer holds every record it promises.
///
/// An empty buffer is an error, not an empty list (libmemstat's reading): the kernel always
/// writes the header, so no bytes means the read went wrong, and serving an empty table
/// would hide that. Bytes beyond the last record are logged and ignored.
pub(crate) fn layout(
    buf: &[u8],
    names: &Names,
    type_header_len: usize,
) -> Result<Layout, SourceError> {
    let p = names.prefix;
    if let Some(v) = array_at::<4>(buf, 0) {
        let version = u32::from_ne_bytes(*v);
        if version != VERSION {
            return Err(SourceError::UnsupportedVersion {
                what: names.what.into(),
                found: format!("{version} ({p}_version; expected {VERSION})"),
            });
        }
    }
    let Some(h) = array_at::<HEADER_LEN>(buf, 0) else {
        return Err(malformed(
            names,
            "byte 0".into(),
            "",
            format!(
                "the stream is {} bytes, shorter than its {HEADER_LEN}-byte header",
                buf.len()
            ),
        ));
    };
    let maxcpus = u32_at(h, 4);
    let count = u32_at(h, 8);
    if maxcpus == 0 || maxcpus > MAX_CPUS {
        return Err(malformed(
            names,
            "byte 4".into(),
            &format!("{p}_maxcpus"),
            format!(
                "{maxcpus} per-CPU records per {}; expected 1..={MAX_CPUS}",
                names.unit
            ),
        ));
    }
    // maxcpus <= 65536, so this fits even a 32-bit usize; count × record_len may not.
    let record_len = type_header_len + maxcpus as usize * PERCPU_LEN;
    let body = buf.len() - HEADER_LEN;
    let needed = (count as usize).checked_mul(record_len);
    match needed {
        Some(n) if n <= body => {
            if n < body {
                tracing::warn!(
                    what = names.what,
                    "ignoring {} bytes after the last of {count} {}s",
                    body - n,
                    names.unit
                );
            }
            Ok(Layout {
                maxcpus,
                count,
                record_len,
            })
        }
        _ => {
            // Name the record the stream ends in, so the message points at the cut.
            let k = body / record_len;
            let at = HEADER_LEN + k * record_len;
            let needed = match needed {
                Some(n) => format!("{} bytes", n + HEADER_LEN),
                None => "more bytes than this machine can address".into(),
            };
            Err(malformed(
                names,
                format!("{} {k} (byte {at})", names.unit),
                &format!("{p}_count"),
                format!(
                    "{count} {unit}s of {record_len} bytes ({type_header_len}-byte header + \
                     {maxcpus} × {PERCPU_LEN}-byte per-CPU records) need {needed}, but the \
                     stream is {} bytes; it ends inside {unit} {k}",
                    buf.len(),
                    unit = names.unit,
                ),
            ))
        }
    }
}

/// Decodes a char[32] name: up to the first NUL, UTF-8 decoded lossily.
///
/// The kernel strlcpy()s names, so a missing NUL or invalid UTF-8 means an odd kernel or
/// a corrupt stream; neither is worth failing the whole refresh over, so both are logged
/// and the name is kept as well as it can be.
pub(crate) fn name(field: &[u8; NAME_LEN], names: &Names, index: u32, at: usize) -> String {
    let (bytes, terminated) = match field.iter().position(|&b| b == 0) {
        Some(end) => (&field[..end], true),
        None => (&field[..], false),
    };
    let name = String::from_utf8_lossy(bytes).into_owned();
    if !terminated {
        tracing::warn!(
            what = names.what,
            "{} {index} (byte {at}): name has no NUL in its {NAME_LEN} bytes; using all of them: {name:?}",
            names.unit
        );
    }
    if std::str::from_utf8(bytes).is_err() {
        tracing::warn!(
            what = names.what,
            "{} {index} (byte {at}): name is not valid UTF-8; decoded lossily as {name:?}",
            names.unit
        );
    }
    name
}

/// Per-CPU rows to expose: CPUs `0..=maxid`, but never past the records the stream has.
pub(crate) fn exposed_cpus(maxid: u32, maxcpus: u32) -> usize {
    (maxid as u64 + 1).min(maxcpus as u64) as usize
}
