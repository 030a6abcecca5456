//! Reading FreeBSD's `vm.zone_stats` and `kern.malloc_stats` sysctls, and the scalars of
//! wired memory (see `wired.rs`).
//!
//! Both are opaque streams whose length changes whenever a zone or malloc type is created, so
//! reading one is a size query followed by a read that may fail with ENOMEM if the stream grew
//! in between. That loop ([`read_stream`]) is plain Rust over a simulated system call, so it is
//! tested on every platform; only [`sys`] touches `sysctlbyname(3)` and exists on FreeBSD only.
//!
//! The byte-level helpers both stream parsers share live in [`super::stream`].

use super::source_def::{Fills, Opening, Os, PathRule, Reading, SourceDef};
use super::{arcstats, malloc, uma, wired, MemoryType, Snapshot, SourceData, SourceError};
use std::path::Path;

/// The `freebsd` source: the running kernel's malloc types and UMA zones.
pub(crate) const SOURCE: SourceDef = SourceDef {
    module: module_path!(),
    name: "freebsd",
    summary: "the FreeBSD kernel's malloc types and UMA zones (kern.malloc_stats, vm.zone_stats)",
    path: PathRule::None,
    auto_on: Some(Os::FreeBsd),
    opening: Opening::KeptOpen,
    fills: Fills::Allocators(&[malloc::ALLOCATOR.allocator, uma::ALLOCATOR.allocator]),
    saved_copy: false,
    groups: &[],
    kinds: wired::KINDS,
    open: open_source,
};

fn open_source(_: Option<&Path>) -> Result<Box<dyn Reading>, SourceError> {
    Ok(Box::new(KernelStreams::open()?))
}

impl Reading for KernelStreams {
    fn read(&mut self) -> Result<SourceData, SourceError> {
        let types = KernelStreams::read(self)?;
        let malloc_in_use = types
            .iter()
            .filter(|t| t.allocator == malloc::ALLOCATOR.allocator)
            .filter_map(|t| t.in_use_bytes)
            .fold(None, |acc: Option<u64>, v| {
                Some(acc.unwrap_or(0).saturating_add(v))
            });
        let raw = self.read_scalars();
        let mut figures = wired::figures(&raw, malloc_in_use);
        // The ARC's statistics, under the names the Linux kstat file gives them.
        for (k, v) in raw.iter().filter(|(k, _)| k.starts_with("arcstats.")) {
            figures.insert(k.clone(), *v);
        }
        arcstats::derive(&mut figures);
        Ok(SourceData {
            types,
            figures,
            ..SourceData::default()
        })
    }
}

/// The running kernel's malloc zone sizes when `snapshot` was read from it (the freebsd
/// source is one of its sources), for the size masks `vmstat -m` prints.
pub(crate) fn live_malloc_zone_sizes(snapshot: &Snapshot) -> Option<Vec<u32>> {
    snapshot
        .source
        .split(',')
        .any(|s| s == SOURCE.name)
        .then(malloc_zone_sizes)
        .flatten()
}

/// How often [`read_stream`] re-queries a stream that keeps outgrowing its buffer. libmemstat
/// retries forever; a bound turns a pathological kernel into an error instead of a hang.
pub(crate) const MAX_ATTEMPTS: u32 = 10;

/// The largest stream we are willing to buffer. `kern.malloc_stats` is ~40 MB on amd64
/// (MAXCPU = 1024 records of 64 bytes for each of ~600 types); a size query far beyond that
/// means something is wrong, and refusing beats asking the allocator for gigabytes.
pub(crate) const MAX_STREAM_BYTES: usize = 1 << 30;

/// Why [`read_stream`] failed. Turned into a [`SourceError`] by [`SysctlError::into_source`],
/// which knows the sysctl's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SysctlError {
    /// The system call failed with this errno.
    Errno(i32),
    /// Every read found the stream larger than the size just queried.
    KeptGrowing { attempts: u32, last_size: usize },
    /// The size query asked for more than [`MAX_STREAM_BYTES`].
    TooLarge { size: usize },
    /// The call claimed to have written more bytes than the buffer holds.
    Overrun { written: usize, buffer: usize },
}

impl SysctlError {
    /// Names the sysctl; EACCES and EPERM become [`SourceError::PermissionDenied`].
    pub(crate) fn into_source(self, what: &str) -> SourceError {
        let what = what.to_string();
        match self {
            SysctlError::Errno(e) if e == libc::EACCES || e == libc::EPERM => {
                SourceError::PermissionDenied {
                    what,
                    hint: "stock FreeBSD lets any user read it; check the jail's or MAC \
                           policy's sysctl restrictions"
                        .into(),
                }
            }
            SysctlError::Errno(e) => SourceError::Io {
                what,
                message: std::io::Error::from_raw_os_error(e).to_string(),
            },
            SysctlError::KeptGrowing {
                attempts,
                last_size,
            } => SourceError::Io {
                what,
                message: format!(
                    "the stream outgrew its buffer {attempts} times in a row \
                     (last size query: {last_size} bytes)"
                ),
            },
            SysctlError::TooLarge { size } => SourceError::Io {
                what,
                message: format!(
                    "the size query reports {size} bytes, more than the {MAX_STREAM_BYTES} \
                     bytes we accept"
                ),
            },
            SysctlError::Overrun { written, buffer } => SourceError::Io {
                what,
                message: format!("the call reports {written} bytes written into {buffer} bytes"),
            },
        }
    }
}

/// Reads a variable-length sysctl into `buf` and returns its length; `buf` is truncated to it.
///
/// `call(None)` is the size query and `call(Some(b))` the read into `b`; both return the
/// length the kernel reports or an errno, exactly like `sysctlbyname(3)`. The read gets some
/// headroom above the queried size because zones and malloc types come and go between the two
/// calls; if the stream still outgrew the buffer (ENOMEM), the size is queried again with more
/// headroom, at most [`MAX_ATTEMPTS`] times. A read shorter than the query (a type went away)
/// is normal and its length is what counts.
///
/// `buf` is meant to be kept across refreshes: its capacity is reused, and only the part
/// beyond its current length is zero-filled, so a steady-state refresh does not touch the
/// allocator or memset tens of megabytes.
pub(crate) fn read_stream<F>(buf: &mut Vec<u8>, mut call: F) -> Result<usize, SysctlError>
where
    F: FnMut(Option<&mut [u8]>) -> Result<usize, i32>,
{
    let mut last_size = 0;
    for attempt in 1..=MAX_ATTEMPTS {
        let queried = call(None).map_err(SysctlError::Errno)?;
        last_size = queried;
        let headroom = (queried / 16).max(4096).saturating_mul(attempt as usize);
        let size = queried.saturating_add(headroom);
        if queried > MAX_STREAM_BYTES {
            return Err(SysctlError::TooLarge { size: queried });
        }
        if buf.len() < size {
            buf.resize(size, 0);
        }
        match call(Some(&mut buf[..size])) {
            Ok(written) if written <= size => {
                buf.truncate(written);
                return Ok(written);
            }
            Ok(written) => {
                return Err(SysctlError::Overrun {
                    written,
                    buffer: size,
                })
            }
            Err(e) if e == libc::ENOMEM => continue,
            Err(e) => return Err(SysctlError::Errno(e)),
        }
    }
    Err(SysctlError::KeptGrowing {
        attempts: MAX_ATTEMPTS,
        last_size,
    })
}

/// The two allocator streams, with buffers kept across refreshes, and the scalars of
/// [`wired::SYSCTLS`] with their MIBs (resolved once; one that does not exist yet, such as
/// ZFS's before the module loads, is looked up again at the next refresh) and buffers.
#[cfg_attr(not(target_os = "freebsd"), allow(dead_code))]
pub(crate) struct KernelStreams {
    malloc_buf: Vec<u8>,
    zone_buf: Vec<u8>,
    scalars: Vec<Scalar>,
}

/// One scalar sysctl: its name, the raw figure it fills, its MIB once resolved, a buffer.
#[cfg_attr(not(target_os = "freebsd"), allow(dead_code))]
struct Scalar {
    name: String,
    figure: String,
    mib: Option<Vec<libc::c_int>>,
    buf: Vec<u8>,
}

/// The wired memory's sysctls, then the ARC's statistics that memstatArc serves.
#[cfg_attr(not(target_os = "freebsd"), allow(dead_code))]
fn scalars() -> Vec<Scalar> {
    let wired = wired::SYSCTLS
        .iter()
        .map(|&(name, figure)| (name.to_string(), figure.to_string()));
    let arc = arcstats::served_statistics().map(|f| {
        (
            format!("kstat.zfs.misc.arcstats.{f}"),
            format!("arcstats.{f}"),
        )
    });
    wired
        .chain(arc)
        .map(|(name, figure)| Scalar {
            name,
            figure,
            mib: None,
            buf: Vec::new(),
        })
        .collect()
}

impl KernelStreams {
    /// Checks that the sysctls are there and readable, so a bad setup fails at startup (before
    /// privileges are dropped) rather than at the first refresh.
    #[cfg(target_os = "freebsd")]
    pub(crate) fn open() -> Result<Self, SourceError> {
        sys::maxid()?;
        for what in [malloc::WHAT, uma::WHAT] {
            sys::sysctl(what, None).map_err(|e| SysctlError::Errno(e).into_source(what))?;
        }
        Ok(KernelStreams {
            malloc_buf: Vec::new(),
            zone_buf: Vec::new(),
            scalars: scalars(),
        })
    }

    /// The scalars' raw values by figure; one that cannot be read is absent (its row is),
    /// and the failure is logged at debug level, as it may simply not exist here.
    #[cfg(target_os = "freebsd")]
    fn read_scalars(&mut self) -> super::Figures {
        let mut raw = super::Figures::new();
        for s in &mut self.scalars {
            if s.mib.is_none() {
                s.mib = sys::name_to_mib(&s.name).ok();
            }
            let Some(mib) = &s.mib else {
                continue;
            };
            match read_stream(&mut s.buf, |b| sys::sysctl_mib(mib, b)) {
                Ok(n) => match wired::value_of(&s.buf[..n]) {
                    Some(v) => {
                        raw.insert(s.figure.clone(), v);
                    }
                    None => tracing::debug!("{}: {n} bytes is not an integer", s.name),
                },
                Err(e) => {
                    tracing::debug!("{}", e.into_source(&s.name));
                    // Gone (a module unloaded): look it up again next time.
                    s.mib = None;
                }
            }
        }
        raw
    }

    #[cfg(not(target_os = "freebsd"))]
    fn read_scalars(&mut self) -> super::Figures {
        super::Figures::new()
    }

    /// Off FreeBSD there is no such kernel interface.
    #[cfg(not(target_os = "freebsd"))]
    pub(crate) fn open() -> Result<Self, SourceError> {
        Err(SourceError::Unavailable {
            message: format!(
                "the freebsd source reads the {} and {} sysctls, which only a FreeBSD kernel \
                 has; recorded figures can be served from a fixture file instead",
                uma::WHAT,
                malloc::WHAT
            ),
        })
    }

    /// Malloc types first, then UMA zones, each in stream order (the order
    /// `memstat_sysctl_all` fetches them in). `kern.smp.maxid` is re-read every time: it is
    /// one cheap call and keeps the per-CPU rows right should it ever change.
    #[cfg(target_os = "freebsd")]
    pub(crate) fn read(&mut self) -> Result<Vec<MemoryType>, SourceError> {
        let maxid = sys::maxid()?;
        let n = read_stream(&mut self.malloc_buf, |b| sys::sysctl(malloc::WHAT, b))
            .map_err(|e| e.into_source(malloc::WHAT))?;
        let mut types = malloc::parse_malloc(&self.malloc_buf[..n], maxid)?;
        let n = read_stream(&mut self.zone_buf, |b| sys::sysctl(uma::WHAT, b))
            .map_err(|e| e.into_source(uma::WHAT))?;
        types.extend(uma::parse_uma(&self.zone_buf[..n], maxid)?);
        Ok(types)
    }

    /// Unreachable in practice, as `open` fails off FreeBSD.
    #[cfg(not(target_os = "freebsd"))]
    pub(crate) fn read(&mut self) -> Result<Vec<MemoryType>, SourceError> {
        Self::open().map(|_| Vec::new())
    }
}

/// The thin `sysctlbyname(3)` binding.
#[cfg(target_os = "freebsd")]
mod sys {
    use super::{SourceError, SysctlError};
    use std::ffi::CString;
    use std::ptr;

    /// The errno of the call that just failed.
    fn last_errno() -> i32 {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }

    /// A sysctl's `oldp` and `oldlen` for `old`: null and 0 for a size query.
    fn old_buffer(old: Option<&mut [u8]>) -> (*mut libc::c_void, usize) {
        match old {
            Some(b) => (b.as_mut_ptr().cast::<libc::c_void>(), b.len()),
            None => (ptr::null_mut(), 0),
        }
    }

    /// `sysctlbyname(name, old, &len, NULL, 0)`: with `None` a size query, otherwise a read
    /// into `old`. Returns the length the kernel reports, or the errno.
    pub(super) fn sysctl(name: &str, old: Option<&mut [u8]>) -> Result<usize, i32> {
        let name = CString::new(name).map_err(|_| libc::EINVAL)?;
        let (oldp, mut len) = old_buffer(old);
        // SAFETY: `name` is a NUL-terminated C string that outlives the call. `oldp` is
        // either null (a size query, which writes only `len`) or points to `len` bytes we
        // borrow mutably for the duration of the call, and the kernel writes at most `len`
        // bytes there. `len` is a live local. A null `newp` with length 0 sets nothing.
        let rc = unsafe { libc::sysctlbyname(name.as_ptr(), oldp, &mut len, ptr::null(), 0) };
        if rc == 0 {
            Ok(len)
        } else {
            Err(last_errno())
        }
    }

    /// `sysctlnametomib(3)`: the MIB of `name`, resolved once so that a refresh does not
    /// parse names.
    pub(super) fn name_to_mib(name: &str) -> Result<Vec<libc::c_int>, i32> {
        let cname = CString::new(name).map_err(|_| libc::EINVAL)?;
        let mut mib = [0 as libc::c_int; libc::CTL_MAXNAME as usize];
        let mut len = mib.len();
        // SAFETY: `cname` is NUL-terminated and outlives the call; `mib` has room for `len`
        // entries, and the kernel writes at most that many and sets `len` to the count.
        let rc = unsafe { libc::sysctlnametomib(cname.as_ptr(), mib.as_mut_ptr(), &mut len) };
        if rc != 0 {
            return Err(last_errno());
        }
        Ok(mib[..len.min(mib.len())].to_vec())
    }

    /// `sysctl(mib, old, &len, NULL, 0)`, as [`sysctl`] does by name.
    pub(super) fn sysctl_mib(mib: &[libc::c_int], old: Option<&mut [u8]>) -> Result<usize, i32> {
        let (oldp, mut len) = old_buffer(old);
        // SAFETY: `mib` points to `mib.len()` ints that outlive the call. `oldp` is null (a
        // size query, which writes only `len`) or points to `len` bytes borrowed mutably for
        // the call, of which the kernel writes at most `len`. A null `newp` sets nothing.
        let rc = unsafe {
            libc::sysctl(
                mib.as_ptr(),
                mib.len() as libc::c_uint,
                oldp,
                &mut len,
                ptr::null(),
                0,
            )
        };
        if rc == 0 {
            Ok(len)
        } else {
            Err(last_errno())
        }
    }

    /// `kern.smp.maxid`, the highest CPU id.
    pub(super) fn maxid() -> Result<u32, SourceError> {
        let what = "kern.smp.maxid";
        let mut b = [0u8; 4];
        let n = sysctl(what, Some(&mut b)).map_err(|e| SysctlError::Errno(e).into_source(what))?;
        let v = i32::from_ne_bytes(b);
        if n != b.len() || v < 0 {
            return Err(SourceError::Malformed {
                what: what.into(),
                location: "byte 0".into(),
                field: "mp_maxid".into(),
                message: format!("expected a non-negative 4-byte int, got {n} bytes ({v})"),
            });
        }
        Ok(v as u32)
    }
}

/// The malloc zone sizes of the running kernel: `vm.malloc.zone_sizes`, the `kz_size` of each
/// `kmemzones` entry, `vm.malloc.zone_count` of them (the count includes the terminating
/// entry, of size 0). Bit n of a malloc type's size mask means zone n. `None` where the
/// sysctls are missing (before FreeBSD 13) or not FreeBSD at all.
pub(crate) fn malloc_zone_sizes() -> Option<Vec<u32>> {
    #[cfg(target_os = "freebsd")]
    {
        let mut count = [0u8; 4];
        let n = sys::sysctl("vm.malloc.zone_count", Some(&mut count)).ok()?;
        let count = (n == 4).then(|| u32::from_ne_bytes(count))?;
        // libmemstat accepts at most 32 zones; so do we (and so the buffer is bounded).
        let mut sizes = [0u8; 32 * 4];
        let len = sys::sysctl("vm.malloc.zone_sizes", Some(&mut sizes)).ok()?;
        parse_zone_sizes(count, &sizes[..len.min(sizes.len())])
    }
    #[cfg(not(target_os = "freebsd"))]
    {
        None
    }
}

/// The running kernel's `kern.osreldate` (`__FreeBSD_version`, e.g. 1402000 for 14.2), which
/// chooses the layout of `dump --format vmstat`; `None` off FreeBSD or if it cannot be read.
pub(crate) fn os_reldate() -> Option<u32> {
    #[cfg(target_os = "freebsd")]
    {
        let mut b = [0u8; 4];
        let n = sys::sysctl("kern.osreldate", Some(&mut b)).ok()?;
        (n == b.len())
            .then(|| i32::from_ne_bytes(b))
            .and_then(|v| u32::try_from(v).ok())
    }
    #[cfg(not(target_os = "freebsd"))]
    {
        None
    }
}

/// `count` native-endian ints from `vm.malloc.zone_sizes`; `None` if `count` is over
/// libmemstat's limit of 32, the buffer is short, or a size is negative.
pub(crate) fn parse_zone_sizes(count: u32, bytes: &[u8]) -> Option<Vec<u32>> {
    if count > 32 || bytes.len() < count as usize * 4 {
        return None;
    }
    bytes
        .chunks_exact(4)
        .take(count as usize)
        .map(|c| u32::try_from(i32::from_ne_bytes([c[0], c[1], c[2], c[3]])).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated sysctl whose stream length follows `sizes`: one entry per call, the last
    /// one repeating. Reads fill the buffer with 0xAB up to the current length.
    struct FakeSysctl {
        sizes: Vec<usize>,
        calls: usize,
        reads: usize,
    }

    impl FakeSysctl {
        fn new(sizes: &[usize]) -> Self {
            FakeSysctl {
                sizes: sizes.to_vec(),
                calls: 0,
                reads: 0,
            }
        }

        fn call(&mut self, b: Option<&mut [u8]>) -> Result<usize, i32> {
            let len = self.sizes[self.calls.min(self.sizes.len() - 1)];
            self.calls += 1;
            match b {
                None => Ok(len),
                Some(b) => {
                    self.reads += 1;
                    if b.len() < len {
                        return Err(libc::ENOMEM);
                    }
                    b[..len].fill(0xAB);
                    Ok(len)
                }
            }
        }
    }

    #[test]
    fn reads_a_stable_stream() {
        let mut fake = FakeSysctl::new(&[1000]);
        let mut buf = Vec::new();
        assert_eq!(read_stream(&mut buf, |b| fake.call(b)), Ok(1000));
        assert_eq!(buf.len(), 1000);
        assert!(buf.iter().all(|&b| b == 0xAB));
        assert_eq!((fake.calls, fake.reads), (2, 1));
    }

    #[test]
    fn growth_within_the_headroom_needs_no_retry() {
        // Queried 100 000, then two zones appeared: 100 000 + 500 fits the headroom.
        let mut fake = FakeSysctl::new(&[100_000, 100_500]);
        let mut buf = Vec::new();
        assert_eq!(read_stream(&mut buf, |b| fake.call(b)), Ok(100_500));
        assert_eq!(fake.reads, 1);
    }

    #[test]
    fn growth_beyond_the_headroom_is_requeried() {
        // Query 1000, read finds 1_000_000 (ENOMEM), query 1_000_000, read succeeds.
        let mut fake = FakeSysctl::new(&[1000, 1_000_000]);
        let mut buf = Vec::new();
        assert_eq!(read_stream(&mut buf, |b| fake.call(b)), Ok(1_000_000));
        assert_eq!((fake.calls, fake.reads), (4, 2));
        assert_eq!(buf.len(), 1_000_000);
    }

    #[test]
    fn a_shrinking_stream_uses_the_read_length() {
        let mut fake = FakeSysctl::new(&[10_000, 6_000]);
        let mut buf = Vec::new();
        assert_eq!(read_stream(&mut buf, |b| fake.call(b)), Ok(6_000));
        assert_eq!(buf.len(), 6_000);
    }

    #[test]
    fn endless_growth_gives_up_after_the_bound() {
        // Every read finds the stream grown past the buffer, whatever its size.
        let mut calls = 0u32;
        let mut buf = Vec::new();
        let r = read_stream(&mut buf, |b| {
            calls += 1;
            match b {
                None => Ok(1000 + calls as usize),
                Some(_) => Err(libc::ENOMEM),
            }
        });
        assert_eq!(
            r,
            Err(SysctlError::KeptGrowing {
                attempts: MAX_ATTEMPTS,
                last_size: 1000 + 2 * MAX_ATTEMPTS as usize - 1,
            })
        );
        assert_eq!(calls, 2 * MAX_ATTEMPTS);
        let e = r.unwrap_err().into_source("vm.zone_stats").to_string();
        assert!(
            e.starts_with("vm.zone_stats: ") && e.contains("10 times"),
            "{e}"
        );
    }

    #[test]
    fn permission_errors_map_to_permission_denied() {
        for errno in [libc::EACCES, libc::EPERM] {
            for fail_query in [true, false] {
                let mut buf = Vec::new();
                let r = read_stream(&mut buf, |b| match b {
                    None if fail_query => Err(errno),
                    None => Ok(64),
                    Some(_) => Err(errno),
                });
                assert_eq!(r, Err(SysctlError::Errno(errno)));
                let e = r.unwrap_err().into_source("kern.malloc_stats");
                assert!(
                    matches!(&e, SourceError::PermissionDenied { what, .. } if what == "kern.malloc_stats"),
                    "{e:?}"
                );
            }
        }
        let e = SysctlError::Errno(libc::ENOENT).into_source("vm.zone_stats");
        assert!(matches!(e, SourceError::Io { .. }), "{e:?}");
    }

    #[test]
    fn refuses_absurd_sizes_and_overruns() {
        let mut buf = Vec::new();
        let r = read_stream(&mut buf, |_| Ok(MAX_STREAM_BYTES + 1));
        assert_eq!(
            r,
            Err(SysctlError::TooLarge {
                size: MAX_STREAM_BYTES + 1
            })
        );
        assert!(buf.capacity() < 1 << 20, "nothing was allocated");
        let r = read_stream(&mut buf, |b| match b {
            None => Ok(10),
            Some(b) => Ok(b.len() + 1),
        });
        assert!(matches!(r, Err(SysctlError::Overrun { .. })), "{r:?}");
    }

    #[test]
    fn the_buffer_is_reused_across_refreshes() {
        let mut fake = FakeSysctl::new(&[200_000]);
        let mut buf = Vec::new();
        read_stream(&mut buf, |b| fake.call(b)).unwrap();
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        for _ in 0..3 {
            fake.calls = 0;
            assert_eq!(read_stream(&mut buf, |b| fake.call(b)), Ok(200_000));
            assert_eq!((buf.as_ptr(), buf.capacity()), (ptr, cap));
        }
    }

    #[test]
    #[cfg(not(target_os = "freebsd"))]
    fn open_is_unavailable_off_freebsd() {
        let e = KernelStreams::open().err().expect("must fail off FreeBSD");
        assert!(matches!(&e, SourceError::Unavailable { message } if message.contains("FreeBSD")));
    }

    #[test]
    fn zone_sizes_are_read_as_the_count_says_and_bounded() {
        let b: Vec<u8> = [16i32, 32, 384, 0, 99]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(parse_zone_sizes(4, &b), Some(vec![16, 32, 384, 0]));
        assert_eq!(parse_zone_sizes(0, &b), Some(vec![]));
        assert_eq!(parse_zone_sizes(6, &b), None, "short buffer");
        assert_eq!(
            parse_zone_sizes(33, &[0; 200]),
            None,
            "over libmemstat's 32"
        );
        let neg: Vec<u8> = (-1i32).to_ne_bytes().to_vec();
        assert_eq!(parse_zone_sizes(1, &neg), None);
    }

    #[test]
    fn exposed_cpus_clamps_to_the_stream() {
        assert_eq!(crate::memstat::stream::exposed_cpus(7, 1024), 8);
        assert_eq!(crate::memstat::stream::exposed_cpus(7, 4), 4);
        assert_eq!(crate::memstat::stream::exposed_cpus(u32::MAX, 65536), 65536);
    }
}
