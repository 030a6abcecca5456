//! UMA stream parser (being written).
