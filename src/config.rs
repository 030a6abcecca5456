//! config (being written).
