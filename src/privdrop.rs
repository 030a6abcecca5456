//! privdrop (being written).
