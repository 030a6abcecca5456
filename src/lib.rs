#![warn(unreachable_pub)]
//! memstat-agentx: kernel allocator statistics served as MEMSTAT-MIB over AgentX.
//!
//! - [`memstat`]: the snapshot model and its sources (Linux slab, FreeBSD UMA and malloc, fixture).
//! - [`mib`]: the MEMSTAT-MIB layout, from a snapshot to ordered objects.
//! - [`agent`]: answers a request from the snapshots, with no I/O: the snapshot store, row
//!   identity, walk tracking and the daemon's scalars.
//! - [`agentx`]: the RFC 2741 codec, framing over the transport, and the session.
//! - [`reader`]: reading the source on a thread of its own.
//! - [`value`], [`oid`]: protocol-neutral SNMP values and object identifiers.
//! - [`report`], [`vmstat`]: the `dump` command's formats.
//! - `boundedfile`: reading files others control, bounded and without blocking.
//! - [`config`], [`logging`], [`privdrop`], [`statedir`]: running as a service.
pub mod agent;
pub mod agentx;
pub(crate) mod alarm;
pub(crate) mod boundedfile;
pub mod config;
pub mod daemon;
pub(crate) mod doorbell;
pub mod index;
pub mod logging;
pub mod master_addr;
pub mod memstat;
pub mod mib;
pub mod privdrop;
pub mod process;
pub mod reader;
pub mod report;
pub mod start;
pub mod statedir;
pub(crate) mod timers;
pub mod top;
pub mod vmstat;
