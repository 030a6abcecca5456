//! bsnmpd's module ABI, declared from bsnmp's headers (freebsd-src `contrib/bsnmp`):
//! `lib/asn1.h` (`struct asn_oid`), `lib/snmp.h` (`enum snmp_syntax`, `struct snmp_value`),
//! `lib/snmpagent.h` (`struct snmp_node`, `struct snmp_context`, `struct snmp_scratch`, the op
//! signature) and `snmpd/snmpmod.h` (`struct snmp_module`, the daemon functions). Read at
//! freebsd-src commits 21c2963a (snmpmod.h), 2dce00c8 (snmpagent.h), 2bf59a10 (snmp.h),
//! 165c5d31 (asn1.h).
//!
//! Only declarations live here. `build.rs` compares the sizes and offsets below with the real
//! headers whenever they are present (FreeBSD's /usr/include/bsnmp, or BSNMP_INCLUDE), so a
//! drift fails the build instead of corrupting bsnmpd's memory.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// `ASN_MAXOIDLEN`.
pub const ASN_MAXOIDLEN: usize = 128;

/// `struct asn_oid`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct asn_oid {
    pub len: c_uint,
    pub subs: [u32; ASN_MAXOIDLEN],
}

impl asn_oid {
    pub const fn empty() -> asn_oid {
        asn_oid {
            len: 0,
            subs: [0; ASN_MAXOIDLEN],
        }
    }

    /// The sub-identifiers in use (a length over 128 is clamped, never trusted).
    pub fn as_slice(&self) -> &[u32] {
        let n = (self.len as usize).min(ASN_MAXOIDLEN);
        &self.subs[..n]
    }

    /// An `asn_oid` holding `s`, or `None` when it is longer than 128.
    pub fn from_slice(s: &[u32]) -> Option<asn_oid> {
        if s.len() > ASN_MAXOIDLEN {
            return None;
        }
        let mut o = asn_oid::empty();
        o.subs[..s.len()].copy_from_slice(s);
        o.len = s.len() as c_uint;
        Some(o)
    }
}

/// `enum snmp_syntax` (an int in C).
pub type snmp_syntax = c_int;
pub const SNMP_SYNTAX_NULL: snmp_syntax = 0;
pub const SNMP_SYNTAX_INTEGER: snmp_syntax = 1;
pub const SNMP_SYNTAX_OCTETSTRING: snmp_syntax = 2;
pub const SNMP_SYNTAX_OID: snmp_syntax = 3;
pub const SNMP_SYNTAX_IPADDRESS: snmp_syntax = 4;
pub const SNMP_SYNTAX_COUNTER: snmp_syntax = 5;
pub const SNMP_SYNTAX_GAUGE: snmp_syntax = 6;
pub const SNMP_SYNTAX_TIMETICKS: snmp_syntax = 7;
pub const SNMP_SYNTAX_COUNTER64: snmp_syntax = 8;
pub const SNMP_SYNTAX_NOSUCHOBJECT: snmp_syntax = 9;
pub const SNMP_SYNTAX_NOSUCHINSTANCE: snmp_syntax = 10;
pub const SNMP_SYNTAX_ENDOFMIBVIEW: snmp_syntax = 11;

/// The `octetstring` member of `union snmp_values`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct snmp_octetstring {
    pub len: c_uint,
    /// Owned by bsnmpd once handed over: it is released with `free(3)`.
    pub octets: *mut u8,
}

/// `union snmp_values`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union snmp_values {
    pub integer: i32,
    pub octetstring: snmp_octetstring,
    pub oid: asn_oid,
    pub ipaddress: [u8; 4],
    pub uint32: u32,
    pub counter64: u64,
}

/// `struct snmp_value`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct snmp_value {
    pub var: asn_oid,
    pub syntax: snmp_syntax,
    pub v: snmp_values,
}

/// `struct snmp_scratch`: per-varbind scratch space during a SET.
#[repr(C)]
pub struct snmp_scratch {
    pub ptr1: *mut c_void,
    pub ptr2: *mut c_void,
    pub int1: u32,
    pub int2: u32,
}

/// `struct snmp_context` (semi-opaque: bsnmpd allocates it inside a larger one).
#[repr(C)]
pub struct snmp_context {
    pub var_index: c_uint,
    pub scratch: *mut snmp_scratch,
    pub dep: *mut c_void,
    pub data: *mut c_void,
    pub code: c_int,
}

/// `enum snmp_node_type`.
pub type snmp_node_type = c_int;
pub const SNMP_NODE_LEAF: snmp_node_type = 1;
pub const SNMP_NODE_COLUMN: snmp_node_type = 2;

/// `enum snmp_op`.
pub type snmp_op = c_int;
pub const SNMP_OP_GET: snmp_op = 1;
pub const SNMP_OP_GETNEXT: snmp_op = 2;
pub const SNMP_OP_SET: snmp_op = 3;
pub const SNMP_OP_COMMIT: snmp_op = 4;
pub const SNMP_OP_ROLLBACK: snmp_op = 5;

/// `snmp_op_t`: `(ctx, value, sub, iidx, op)`; `sub` is the node's OID length, `iidx` the
/// node's `index` field.
pub type snmp_op_t = unsafe extern "C" fn(
    ctx: *mut snmp_context,
    value: *mut snmp_value,
    sub: c_uint,
    iidx: c_uint,
    op: snmp_op,
) -> c_int;

/// `SNMP_NODE_CANSET`.
pub const SNMP_NODE_CANSET: c_uint = 0x0001;

/// `struct snmp_node`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct snmp_node {
    pub oid: asn_oid,
    pub name: *const c_char,
    pub node_type: snmp_node_type,
    pub syntax: snmp_syntax,
    pub op: Option<snmp_op_t>,
    pub flags: c_uint,
    pub index: u32,
    pub data: *mut c_void,
    pub tree_data: *mut c_void,
}

/// `struct lmodule`: opaque to modules.
#[repr(C)]
pub struct lmodule {
    _private: [u8; 0],
}

/// `enum snmpd_proxy_err` (only passed through).
pub type snmpd_proxy_err = c_int;

/// The `proxy` member's type; this module has no proxy.
pub type proxy_fn = unsafe extern "C" fn(
    pdu: *mut c_void,
    tport: *mut c_void,
    port: *const asn_oid,
    addr: *const c_void,
    addrlen: u32,
    ierr: c_int,
    vi: i32,
    priv_: c_int,
) -> snmpd_proxy_err;

/// `struct snmp_module`: what the exported `config` symbol holds.
#[repr(C)]
pub struct snmp_module {
    pub comment: *const c_char,
    pub init: Option<unsafe extern "C" fn(*mut lmodule, c_int, *mut *mut c_char) -> c_int>,
    pub fini: Option<unsafe extern "C" fn() -> c_int>,
    pub idle: Option<unsafe extern "C" fn()>,
    pub dump: Option<unsafe extern "C" fn()>,
    pub config: Option<unsafe extern "C" fn()>,
    pub start: Option<unsafe extern "C" fn()>,
    pub proxy: Option<proxy_fn>,
    pub tree: *const snmp_node,
    pub tree_size: c_uint,
    pub loading: Option<unsafe extern "C" fn(*const lmodule, c_int)>,
}

/// SNMP error-status codes an op returns (`lib/snmp.h`).
pub const SNMP_ERR_NOERROR: c_int = 0;
pub const SNMP_ERR_NOSUCHNAME: c_int = 2;
pub const SNMP_ERR_GENERR: c_int = 5;
pub const SNMP_ERR_WRONG_TYPE: c_int = 7;
pub const SNMP_ERR_WRONG_VALUE: c_int = 10;
pub const SNMP_ERR_RES_UNAVAIL: c_int = 13;
pub const SNMP_ERR_COMMIT_FAILED: c_int = 14;
pub const SNMP_ERR_UNDO_FAILED: c_int = 15;
pub const SNMP_ERR_NOT_WRITEABLE: c_int = 17;

/// The daemon functions a module calls (`snmpmod.h`). They are looked up at `init` with
/// `dlsym(RTLD_DEFAULT)` rather than linked, so the module has no undefined symbols: a host
/// that lacks one fails `init` with its name instead of failing `dlopen`.
pub type fd_select_fn = unsafe extern "C" fn(
    fd: c_int,
    func: unsafe extern "C" fn(c_int, *mut c_void),
    udata: *mut c_void,
    module: *mut lmodule,
) -> *mut c_void;
pub type fd_deselect_fn = unsafe extern "C" fn(id: *mut c_void);
pub type timer_start_repeat_fn = unsafe extern "C" fn(
    ticks: c_uint,
    repeat_ticks: c_uint,
    func: unsafe extern "C" fn(*mut c_void),
    udata: *mut c_void,
    module: *mut lmodule,
) -> *mut c_void;
pub type timer_stop_fn = unsafe extern "C" fn(id: *mut c_void);
pub type or_register_fn =
    unsafe extern "C" fn(oid: *const asn_oid, descr: *const c_char, module: *mut lmodule) -> c_uint;
pub type or_unregister_fn = unsafe extern "C" fn(idx: c_uint);
pub type get_ticks_fn = unsafe extern "C" fn() -> u64;
/// `snmp_send_trap(trap_oid, const struct snmp_value *..., NULL)`.
pub type snmp_send_trap_fn = unsafe extern "C" fn(trap_oid: *const asn_oid, ...);

/// The layout assertions generated by build.rs from bsnmp's headers (when present).
mod layout {
    #![allow(clippy::all, unused_imports)]
    use super::*;
    use std::mem::{offset_of, size_of};
    include!(concat!(env!("OUT_DIR"), "/bsnmp_layout.rs"));
}
pub use layout::LAYOUT_CHECKED_AGAINST;

// The sizes on LP64 (FreeBSD and Linux on amd64/arm64), checked here too so a slip in these
// declarations shows up even where no header is at hand.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<asn_oid>() == 516);
    assert!(std::mem::size_of::<snmp_value>() == 1040);
    assert!(std::mem::size_of::<snmp_node>() == 568);
    assert!(std::mem::size_of::<snmp_module>() == 88);
};
