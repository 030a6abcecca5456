//! malloc stream parser (being written).
