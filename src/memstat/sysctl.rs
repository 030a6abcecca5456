//! Reading the FreeBSD stream sysctls (placeholder; being written).
use super::{MemoryType, SourceError};

/// The reused buffers for `vm.zone_stats` and `kern.malloc_stats`.
pub struct KernelStreams {}

impl KernelStreams {
    pub fn open() -> Result<Self, SourceError> {
        Err(SourceError::Unavailable {
            message: "the freebsd source is only available on FreeBSD".into(),
        })
    }

    pub fn read(&mut self) -> Result<Vec<MemoryType>, SourceError> {
        Ok(Vec::new())
    }
}
