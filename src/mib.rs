//! mib (being written).
