#![warn(unreachable_pub)]
//! snmp_agentx.so: an RFC 2741 AgentX master as a loadable module of FreeBSD's bsnmpd
//! (snmpmod(3)), so that AgentX subagents such as memstat-agentx register with bsnmpd itself.
//!
//! - [`abi`]: bsnmpd's structures and function types, declared from its headers.
//! - [`settings`]: module arguments (the claims) and config-section variables.
//! - [`registry`]: claims, registrations, and which session answers for an OID.
//! - `master`: listeners, sessions, forwarding; no FFI.
//! - `error_status`: the SNMP error-status an op returns, as a type.
//! - `sys`: send(2) without SIGPIPE, and poll(2), which std does not offer.
//! - this file: the exported `config` symbol and the thin FFI layer. Every entry point runs
//!   under `catch_unwind`, so a panic never unwinds into bsnmpd; it becomes genErr or an
//!   `init` failure.
pub mod abi;
mod error_status;
mod master;
pub mod registry;
pub mod settings;
mod sys;

use abi::*;
use agentx_proto::oid::Oid;
use agentx_proto::pdu::{Value, VarBind};
use error_status::ErrorStatus;
use master::{Host, Master};
use settings::{parse_args, Settings, VarValue, VARS};
use std::cell::UnsafeCell;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::os::unix::io::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, TryLockError};
use std::time::Instant;

/// The module's own variables live under this OID: `enterprises.32473.2.1.N` (32473 is the
/// documentation enterprise number MEMSTAT-MIB also uses as a placeholder).
pub const CONFIG_ROOT: &[u32] = &[1, 3, 6, 1, 4, 1, 32473, 2, 1];

/// The names of the claim nodes (bsnmpd keeps the pointers, so they are static).
const CLAIM_NAMES: [&CStr; settings::MAX_CLAIMS] = [
    c"agentxClaim1",
    c"agentxClaim2",
    c"agentxClaim3",
    c"agentxClaim4",
    c"agentxClaim5",
    c"agentxClaim6",
    c"agentxClaim7",
    c"agentxClaim8",
    c"agentxClaim9",
    c"agentxClaim10",
    c"agentxClaim11",
    c"agentxClaim12",
    c"agentxClaim13",
    c"agentxClaim14",
    c"agentxClaim15",
    c"agentxClaim16",
];

/// The daemon functions, looked up at `init`.
#[derive(Clone, Copy)]
struct Daemon {
    module: *mut lmodule,
    fd_select: fd_select_fn,
    fd_deselect: fd_deselect_fn,
    timer_start_repeat: timer_start_repeat_fn,
    timer_stop: timer_stop_fn,
    or_register: or_register_fn,
    or_unregister: or_unregister_fn,
    get_ticks: get_ticks_fn,
    start_tick: *const u64,
    snmp_send_trap: snmp_send_trap_fn,
}

impl Daemon {
    /// Looks every symbol up in the process (bsnmpd exports them to its modules).
    fn resolve(module: *mut lmodule) -> Result<Daemon, &'static str> {
        fn sym(name: &'static CStr) -> Result<*mut c_void, &'static str> {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the
            // loaded objects' symbol tables.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            if p.is_null() {
                Err(name.to_str().unwrap_or("?"))
            } else {
                Ok(p)
            }
        }
        // SAFETY: each symbol is bsnmpd's function (or variable) of that name, whose C
        // signature snmpmod.h declares and abi.rs transcribes.
        unsafe {
            Ok(Daemon {
                module,
                fd_select: std::mem::transmute::<*mut c_void, fd_select_fn>(sym(c"fd_select")?),
                fd_deselect: std::mem::transmute::<*mut c_void, fd_deselect_fn>(sym(
                    c"fd_deselect",
                )?),
                timer_start_repeat: std::mem::transmute::<*mut c_void, timer_start_repeat_fn>(sym(
                    c"timer_start_repeat",
                )?),
                timer_stop: std::mem::transmute::<*mut c_void, timer_stop_fn>(sym(c"timer_stop")?),
                or_register: std::mem::transmute::<*mut c_void, or_register_fn>(sym(
                    c"or_register",
                )?),
                or_unregister: std::mem::transmute::<*mut c_void, or_unregister_fn>(sym(
                    c"or_unregister",
                )?),
                get_ticks: std::mem::transmute::<*mut c_void, get_ticks_fn>(sym(c"get_ticks")?),
                start_tick: sym(c"start_tick")? as *const u64,
                snmp_send_trap: std::mem::transmute::<*mut c_void, snmp_send_trap_fn>(sym(
                    c"snmp_send_trap",
                )?),
            })
        }
    }
}

fn syslog(priority: c_int, msg: &str) {
    let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a constant "%s" format with one NUL-terminated string argument.
    unsafe { libc::syslog(priority, c"%s".as_ptr(), msg.as_ptr()) };
}

/// [`Host`] on top of bsnmpd's functions.
struct BsnmpdHost(Daemon);

impl Host for BsnmpdHost {
    fn watch(&mut self, fd: RawFd) -> Option<usize> {
        // SAFETY: fd_select keeps the callback and fd; the callback is a plain function and
        // the fd stays open until unwatch() is called for it (Master closes after unwatch).
        let id =
            unsafe { (self.0.fd_select)(fd, on_readable, std::ptr::null_mut(), self.0.module) };
        (!id.is_null()).then_some(id as usize)
    }

    fn unwatch(&mut self, id: usize) {
        // SAFETY: id came from fd_select and is deselected once (Master drops it after).
        unsafe { (self.0.fd_deselect)(id as *mut c_void) };
    }

    fn uptime(&self) -> u32 {
        // SAFETY: get_ticks has no arguments; start_tick is bsnmpd's u64 variable.
        unsafe { (self.0.get_ticks)().wrapping_sub(*self.0.start_tick) as u32 }
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn or_register(&mut self, id: &Oid, descr: &[u8]) -> u32 {
        let Some(oid) = asn_oid::from_slice(&id.0) else {
            return 0;
        };
        let mut d: Vec<u8> = descr
            .iter()
            .copied()
            .filter(|&b| b != 0)
            .take(255)
            .collect();
        d.push(0);
        // SAFETY: both pointers are valid for the call; or_register copies the OID and the
        // string (strlcpy) into its own row.
        unsafe { (self.0.or_register)(&oid, d.as_ptr() as *const c_char, self.0.module) }
    }

    fn or_unregister(&mut self, index: u32) {
        // SAFETY: an index or_register returned.
        unsafe { (self.0.or_unregister)(index) };
    }

    fn send_trap(&mut self, trap: &Oid, varbinds: &[VarBind]) {
        let Some(trap) = asn_oid::from_slice(&trap.0) else {
            return;
        };
        // Values that borrow the varbinds' bytes: bsnmpd copies each binding into its trap
        // PDU, encodes and sends it during the call, and frees nothing of ours.
        let mut values: Vec<snmp_value> = Vec::with_capacity(varbinds.len());
        for vb in varbinds {
            let Some(var) = asn_oid::from_slice(&vb.name.0) else {
                return;
            };
            let mut sv = snmp_value {
                var,
                syntax: SNMP_SYNTAX_NULL,
                v: snmp_values { counter64: 0 },
            };
            if !fill_borrowed(&mut sv, &vb.value) {
                return;
            }
            values.push(sv);
        }
        let mut p = [std::ptr::null::<snmp_value>(); master::MAX_TRAP_VARBINDS + 1];
        for (i, v) in values.iter().enumerate().take(master::MAX_TRAP_VARBINDS) {
            p[i] = v;
        }
        // SAFETY: snmp_send_trap reads `const struct snmp_value *` arguments until the first
        // NULL; p holds the values (alive until the call returns) followed by NULLs, and its
        // last element is always NULL.
        unsafe {
            (self.0.snmp_send_trap)(
                &trap, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11],
                p[12], p[13], p[14], p[15], p[16], p[17], p[18], p[19], p[20], p[21], p[22], p[23],
                p[24], p[25], p[26], p[27], p[28], p[29], p[30], p[31], p[32],
            )
        };
    }

    fn log(&self, priority: i32, msg: &str) {
        syslog(priority, msg);
    }
}

/// Sets `sv`'s syntax and value from `v`, pointing octet strings at `v`'s own bytes (for
/// traps, which bsnmpd does not free). False for values bsnmpd cannot carry.
fn fill_borrowed(sv: &mut snmp_value, v: &Value) -> bool {
    let (syntax, val) = match v {
        Value::OctetString(b) | Value::Opaque(b) => (
            SNMP_SYNTAX_OCTETSTRING,
            snmp_values {
                octetstring: snmp_octetstring {
                    len: b.len() as c_uint,
                    octets: b.as_ptr() as *mut u8,
                },
            },
        ),
        other => match scalar(other) {
            Some(x) => x,
            None => return false,
        },
    };
    sv.syntax = syntax;
    sv.v = val;
    true
}

/// Every value but octet strings.
fn scalar(v: &Value) -> Option<(snmp_syntax, snmp_values)> {
    Some(match v {
        Value::Integer(i) => (SNMP_SYNTAX_INTEGER, snmp_values { integer: *i }),
        Value::Null => (SNMP_SYNTAX_NULL, snmp_values { counter64: 0 }),
        Value::ObjectIdentifier(o) => (
            SNMP_SYNTAX_OID,
            snmp_values {
                oid: asn_oid::from_slice(&o.0)?,
            },
        ),
        Value::IpAddress(a) => (SNMP_SYNTAX_IPADDRESS, snmp_values { ipaddress: *a }),
        Value::Counter32(n) => (SNMP_SYNTAX_COUNTER, snmp_values { uint32: *n }),
        Value::Gauge32(n) => (SNMP_SYNTAX_GAUGE, snmp_values { uint32: *n }),
        Value::TimeTicks(n) => (SNMP_SYNTAX_TIMETICKS, snmp_values { uint32: *n }),
        Value::Counter64(n) => (SNMP_SYNTAX_COUNTER64, snmp_values { counter64: *n }),
        _ => return None,
    })
}

/// Sets `sv` from `v` for bsnmpd to keep: octet strings are copied into `malloc`ed memory,
/// which bsnmpd releases with `free(3)`. Opaque travels as an octet string (bsnmp has no
/// Opaque syntax).
fn fill_owned(sv: &mut snmp_value, v: &Value) -> bool {
    match v {
        Value::OctetString(b) | Value::Opaque(b) => {
            let octets = if b.is_empty() {
                std::ptr::null_mut()
            } else {
                // SAFETY: malloc of a non-zero size; checked for NULL below.
                let p = unsafe { libc::malloc(b.len()) } as *mut u8;
                if p.is_null() {
                    return false;
                }
                // SAFETY: p holds b.len() bytes and does not overlap b.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
                p
            };
            sv.syntax = SNMP_SYNTAX_OCTETSTRING;
            sv.v = snmp_values {
                octetstring: snmp_octetstring {
                    len: b.len() as c_uint,
                    octets,
                },
            };
            true
        }
        other => fill_borrowed(sv, other),
    }
}

/// The value bsnmpd hands a SET, read by its syntax.
fn read_value(sv: &snmp_value) -> Option<Value> {
    // SAFETY: bsnmpd fills the union member that `syntax` names (snmp.h); octet strings
    // point at `len` readable bytes (or are NULL with len 0).
    unsafe {
        Some(match sv.syntax {
            SNMP_SYNTAX_NULL => Value::Null,
            SNMP_SYNTAX_INTEGER => Value::Integer(sv.v.integer),
            SNMP_SYNTAX_OCTETSTRING => {
                let s = sv.v.octetstring;
                if s.len == 0 || s.octets.is_null() {
                    Value::OctetString(Vec::new())
                } else {
                    Value::OctetString(
                        std::slice::from_raw_parts(s.octets, s.len as usize).to_vec(),
                    )
                }
            }
            SNMP_SYNTAX_OID => Value::ObjectIdentifier(Oid(sv.v.oid.as_slice().to_vec())),
            SNMP_SYNTAX_IPADDRESS => Value::IpAddress(sv.v.ipaddress),
            SNMP_SYNTAX_COUNTER => Value::Counter32(sv.v.uint32),
            SNMP_SYNTAX_GAUGE => Value::Gauge32(sv.v.uint32),
            SNMP_SYNTAX_TIMETICKS => Value::TimeTicks(sv.v.uint32),
            SNMP_SYNTAX_COUNTER64 => Value::Counter64(sv.v.counter64),
            _ => return None,
        })
    }
}

/// Everything the module holds between calls.
struct State {
    master: Master,
    daemon: Daemon,
    tree: Vec<snmp_node>,
    timer: usize,
    /// Settings before each not-yet-committed assignment, for ROLLBACK (newest last).
    undo: Vec<Settings>,
}

// SAFETY: the raw pointers (the lmodule handle, the tree's name pointers to static strings)
// are only used on bsnmpd's one thread; the Mutex only guards against re-entry.
unsafe impl Send for State {}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Runs `f` on the state. `None` when there is none, or when called re-entrantly (bsnmpd
/// never does, but a host might).
fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    let mut g = match STATE.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    g.as_mut().map(f)
}

/// Runs an entry point with panics caught: `on_panic` is returned instead of unwinding.
fn guarded<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            syslog(libc::LOG_ERR, "agentx: internal error (panic caught)");
            on_panic
        }
    }
}

unsafe extern "C" fn on_readable(fd: c_int, _udata: *mut c_void) {
    guarded((), || {
        with_state(|s| s.master.readable(fd));
    })
}

unsafe extern "C" fn on_timer(_udata: *mut c_void) {
    guarded((), || {
        with_state(|s| s.master.tick());
    })
}

/// The op of every claim node: `iidx` is the claim's number.
unsafe extern "C" fn op_claim(
    ctx: *mut snmp_context,
    value: *mut snmp_value,
    _sub: c_uint,
    iidx: c_uint,
    op: snmp_op,
) -> c_int {
    guarded(ErrorStatus::GEN_ERR, || {
        // SAFETY: bsnmpd passes its binding, valid and exclusively ours for the call.
        let Some(value) = (unsafe { value.as_mut() }) else {
            return ErrorStatus::GEN_ERR;
        };
        // SAFETY: ctx and its scratch are bsnmpd's, valid for the call (or NULL).
        let scratch = unsafe { ctx.as_mut().and_then(|c| c.scratch.as_mut()) };
        let var = Oid(value.var.as_slice().to_vec());
        with_state(|s| match op {
            SNMP_OP_GET => match s.master.get(&var) {
                Ok(v) if fill_owned(value, &v) => ErrorStatus::NO_ERROR,
                Ok(_) => ErrorStatus::GEN_ERR,
                Err(e) => e,
            },
            SNMP_OP_GETNEXT => match s.master.get_next(iidx as usize, &var) {
                Ok(vb) => match asn_oid::from_slice(&vb.name.0) {
                    Some(name) if fill_owned(value, &vb.value) => {
                        value.var = name;
                        ErrorStatus::NO_ERROR
                    }
                    _ => ErrorStatus::GEN_ERR,
                },
                Err(e) => e,
            },
            SNMP_OP_SET => {
                let Some(v) = read_value(value) else {
                    return ErrorStatus::WRONG_TYPE;
                };
                match s.master.set(VarBind {
                    name: var,
                    value: v,
                }) {
                    Ok(txn) => {
                        if let Some(sc) = scratch {
                            sc.int1 = txn;
                        }
                        ErrorStatus::NO_ERROR
                    }
                    Err(e) => e,
                }
            }
            SNMP_OP_COMMIT => {
                if let Some(sc) = scratch {
                    s.master.commit(sc.int1);
                }
                ErrorStatus::NO_ERROR
            }
            SNMP_OP_ROLLBACK => match scratch.map(|sc| s.master.rollback(sc.int1)) {
                Some(Err(e)) => e,
                Some(Ok(())) | None => ErrorStatus::NO_ERROR,
            },
            _ => ErrorStatus::GEN_ERR,
        })
        .unwrap_or(ErrorStatus::GEN_ERR)
    })
    // The int bsnmpd wants: ErrorStatus holds bsnmp's own numbering (see error_status.rs).
    .0
}

/// The op of the config variables: `iidx` is the variable's sub-identifier.
unsafe extern "C" fn op_config(
    _ctx: *mut snmp_context,
    value: *mut snmp_value,
    _sub: c_uint,
    iidx: c_uint,
    op: snmp_op,
) -> c_int {
    guarded(ErrorStatus::GEN_ERR, || {
        // SAFETY: as in op_claim.
        let Some(value) = (unsafe { value.as_mut() }) else {
            return ErrorStatus::GEN_ERR;
        };
        with_state(|s| match op {
            SNMP_OP_GET => {
                let v = match s.master.settings.get(iidx) {
                    Some(Ok(i)) => Value::Integer(i),
                    Some(Err(b)) => Value::OctetString(b),
                    None => return ErrorStatus::NO_SUCH_NAME,
                };
                if fill_owned(value, &v) {
                    ErrorStatus::NO_ERROR
                } else {
                    ErrorStatus::GEN_ERR
                }
            }
            SNMP_OP_SET => {
                let read = read_value(value);
                let v = match &read {
                    Some(Value::Integer(i)) => VarValue::Int(*i),
                    Some(Value::OctetString(b)) => VarValue::Octets(b),
                    _ => return ErrorStatus::WRONG_TYPE,
                };
                let before = s.master.settings.clone();
                match s.master.settings.set(iidx, v) {
                    Ok(()) => {
                        s.undo.push(before);
                        ErrorStatus::NO_ERROR
                    }
                    Err(e) => {
                        syslog(
                            libc::LOG_ERR,
                            &format!("agentx: {}: {}", var_name(iidx), e.0),
                        );
                        ErrorStatus::WRONG_VALUE
                    }
                }
            }
            SNMP_OP_ROLLBACK => {
                if let Some(before) = s.undo.pop() {
                    s.master.settings = before;
                }
                ErrorStatus::NO_ERROR
            }
            SNMP_OP_COMMIT => {
                s.undo.clear();
                ErrorStatus::NO_ERROR
            }
            _ => ErrorStatus::NO_SUCH_NAME,
        })
        .unwrap_or(ErrorStatus::GEN_ERR)
    })
    .0
}

fn var_name(subid: u32) -> &'static str {
    VARS.iter()
        .find(|v| v.subid == subid)
        .and_then(|v| v.name.to_str().ok())
        .unwrap_or("?")
}

fn build_tree(claims: &[settings::Claim]) -> Vec<snmp_node> {
    let node =
        |oid: &[u32], name: &'static CStr, node_type, syntax, op: snmp_op_t, index| snmp_node {
            oid: asn_oid::from_slice(oid).unwrap_or(asn_oid::empty()),
            name: name.as_ptr(),
            node_type,
            syntax,
            op: Some(op),
            flags: 0,
            index,
            data: std::ptr::null_mut(),
            tree_data: std::ptr::null_mut(),
        };
    let mut tree: Vec<snmp_node> = claims
        .iter()
        .zip(CLAIM_NAMES)
        .enumerate()
        .map(|(i, (c, name))| {
            node(
                &c.oid.0,
                name,
                SNMP_NODE_COLUMN,
                c.syntax,
                op_claim,
                i as u32,
            )
        })
        .collect();
    for v in &VARS {
        let mut oid = CONFIG_ROOT.to_vec();
        oid.push(v.subid);
        // Leaves without SNMP_NODE_CANSET: bsnmpd's config reader sets them; an SNMP SET is
        // refused (a write community must not move the socket).
        tree.push(node(
            &oid,
            v.name,
            SNMP_NODE_LEAF,
            v.syntax,
            op_config,
            v.subid,
        ));
    }
    tree
}

unsafe extern "C" fn agentx_init(
    module: *mut lmodule,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    guarded(1, || {
        let mut args: Vec<String> = Vec::new();
        for i in 0..argc.max(0) as usize {
            // SAFETY: bsnmpd passes argc valid NUL-terminated strings in argv.
            let p = unsafe { *argv.add(i) };
            if !p.is_null() {
                // SAFETY: p is one of those strings.
                args.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
            }
        }
        let claims = match parse_args(args.iter().map(String::as_str)) {
            Ok(c) => c,
            Err(e) => {
                syslog(libc::LOG_ERR, &format!("agentx: {e}"));
                return 1;
            }
        };
        if let Some(c) = claims
            .iter()
            .find(|c| c.oid.starts_with(CONFIG_ROOT) || CONFIG_ROOT.starts_with(&c.oid.0))
        {
            syslog(
                libc::LOG_ERR,
                &format!(
                    "agentx: claim {} overlaps the module's own variables",
                    c.oid
                ),
            );
            return 1;
        }
        let daemon = match Daemon::resolve(module) {
            Ok(d) => d,
            Err(name) => {
                syslog(
                    libc::LOG_ERR,
                    &format!("agentx: bsnmpd does not export {name}"),
                );
                return 1;
            }
        };
        let tree = build_tree(&claims);
        let master = Master::new(claims, Box::new(BsnmpdHost(daemon)));
        let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
        let st = g.insert(State {
            master,
            daemon,
            tree,
            timer: 0,
            undo: Vec::new(),
        });
        // SAFETY: bsnmpd calls init on its one thread and reads config.tree only after init
        // returns (lm_start); the tree Vec lives in STATE until fini, after bsnmpd has
        // copied and then unmerged it.
        unsafe {
            let m = &mut *config.0.get();
            m.tree = st.tree.as_ptr();
            m.tree_size = st.tree.len() as c_uint;
        }
        0
    })
}

unsafe extern "C" fn agentx_start() {
    guarded((), || {
        with_state(|s| {
            s.master.listen();
            // SAFETY: a plain callback and our module handle; stopped in fini.
            let t = unsafe {
                (s.daemon.timer_start_repeat)(
                    100,
                    100,
                    on_timer,
                    std::ptr::null_mut(),
                    s.daemon.module,
                )
            };
            s.timer = t as usize;
        });
    })
}

unsafe extern "C" fn agentx_idle() {
    guarded((), || {
        with_state(|s| s.master.idle());
    })
}

unsafe extern "C" fn agentx_config() {
    guarded((), || {
        with_state(|s| s.master.listen());
    })
}

unsafe extern "C" fn agentx_dump() {
    guarded((), || {
        if let Some(lines) = with_state(|s| s.master.dump()) {
            for l in lines {
                syslog(libc::LOG_DEBUG, &format!("agentx: {l}"));
            }
        }
    })
}

unsafe extern "C" fn agentx_fini() -> c_int {
    guarded(1, || {
        let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut s) = g.take() {
            s.master.shutdown();
            if s.timer != 0 {
                // SAFETY: the timer timer_start_repeat returned, stopped once.
                unsafe { (s.daemon.timer_stop)(s.timer as *mut c_void) };
            }
            // SAFETY: as in init; bsnmpd has unmerged the tree before calling fini.
            unsafe {
                let m = &mut *config.0.get();
                m.tree = std::ptr::null();
                m.tree_size = 0;
            }
        }
        0
    })
}

/// `struct snmp_module` with interior mutability: `init` fills in the tree, which depends
/// on the module arguments.
#[repr(transparent)]
pub struct ModuleConfig(UnsafeCell<snmp_module>);

// SAFETY: bsnmpd is single-threaded; the cell is written only in init and fini.
unsafe impl Sync for ModuleConfig {}

/// The symbol bsnmpd looks up after dlopen.
#[allow(non_upper_case_globals)]
#[no_mangle]
pub static config: ModuleConfig = ModuleConfig(UnsafeCell::new(snmp_module {
    comment: c"AgentX (RFC 2741) master: serves the claimed subtrees from AgentX subagents"
        .as_ptr(),
    init: Some(agentx_init),
    fini: Some(agentx_fini),
    idle: Some(agentx_idle),
    dump: Some(agentx_dump),
    config: Some(agentx_config),
    start: Some(agentx_start),
    proxy: None,
    tree: std::ptr::null(),
    tree_size: 0,
    loading: None,
}));
