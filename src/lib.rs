//! memstat-agentx: kernel allocator statistics served as MEMSTAT-MIB over AgentX.
//!
//! - [`memstat`]: the snapshot model and its sources (Linux slab, FreeBSD UMA and malloc, fixture).
//! - [`mib`]: the MEMSTAT-MIB layout, from a snapshot to ordered objects.
//! - [`value`]: VarBind values, shared by the MIB and the codec.
//! - [`agentx`]: the RFC 2741 codec and the subagent session.
//! - [`cache`]: snapshots, on-demand refresh and walk pinning.
//! - [`config`], [`logging`], [`privdrop`]: running as a service.
pub mod agentx;
pub mod cache;
pub mod config;
pub mod index;
pub mod logging;
pub mod memstat;
pub mod mib;
pub mod oid;
pub mod privdrop;
pub mod report;
pub mod value;
