//! logging (being written).
