//! The SNMP error-status an op hands back to bsnmpd, as a type of its own.
//!
//! bsnmpd's ops return an `int` that snmpagent.c puts into the Response's error-status (a GET's
//! noSuchName becoming noSuchInstance for SNMPv2c). bsnmp numbers its `SNMP_ERR_*` exactly as
//! RFC 3416 numbers error-status, noError(0) to inconsistentName(18); the assertions at the
//! end of this file hold ours to abi.rs's, which build.rs holds to bsnmp's headers.
//!
//! Why not agentx_proto's `ResError`, whose codes 0..=18 are the same numbers? Because the
//! rest of its range, the AgentX codes from openFailed(256) on, is no SNMP error-status: an
//! op that returned one would put a value outside RFC 3416's range into bsnmpd's Response. A
//! separate type makes the one crossing explicit, [`ErrorStatus::from_agentx`], where
//! AgentX-only codes become genErr. It is open, like `ResError`: a number without a name here
//! still passes through and shows its number.
use agentx_proto::pdu::ResError;
use std::fmt;
use std::os::raw::c_int;

/// An SNMP error-status (RFC 3416 §3, `error-status`), in the op's return type.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ErrorStatus(pub(crate) c_int);

/// RFC 3416's names of error-status 0..=18, indexed by the code.
const NAMES: [&str; 19] = [
    "noError",
    "tooBig",
    "noSuchName",
    "badValue",
    "readOnly",
    "genErr",
    "noAccess",
    "wrongType",
    "wrongLength",
    "wrongEncoding",
    "wrongValue",
    "noCreation",
    "inconsistentValue",
    "resourceUnavailable",
    "commitFailed",
    "undoFailed",
    "authorizationError",
    "notWritable",
    "inconsistentName",
];

impl ErrorStatus {
    pub(crate) const NO_ERROR: ErrorStatus = ErrorStatus(0);
    /// For a GET, bsnmpd answers noSuchInstance instead; for a GETNEXT, it moves on to the
    /// next node of its tree.
    pub(crate) const NO_SUCH_NAME: ErrorStatus = ErrorStatus(2);
    pub(crate) const GEN_ERR: ErrorStatus = ErrorStatus(5);
    pub(crate) const WRONG_TYPE: ErrorStatus = ErrorStatus(7);
    pub(crate) const WRONG_VALUE: ErrorStatus = ErrorStatus(10);
    pub(crate) const COMMIT_FAILED: ErrorStatus = ErrorStatus(14);
    pub(crate) const UNDO_FAILED: ErrorStatus = ErrorStatus(15);
    pub(crate) const NOT_WRITABLE: ErrorStatus = ErrorStatus(17);

    /// A subagent's `res.error` as the SNMP error-status: codes 1..=18 are RFC 3416's own
    /// (RFC 2741 §6.2.16 borrows them) and pass through; the AgentX-only codes, and noError
    /// where the caller has an error to report, become genErr.
    pub(crate) fn from_agentx(e: ResError) -> ErrorStatus {
        if (1..=18).contains(&e.0) {
            ErrorStatus(c_int::from(e.0))
        } else {
            ErrorStatus::GEN_ERR
        }
    }

    /// RFC 3416's name, `None` for a code outside 0..=18.
    pub(crate) fn name(self) -> Option<&'static str> {
        usize::try_from(self.0)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
    }
}

impl fmt::Display for ErrorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "unknown({})", self.0),
        }
    }
}

/// The name and the number: test failures then read `genErr(5)`, not a bare 5.
impl fmt::Debug for ErrorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}({})", self.0)
    }
}

// bsnmp's numbering, as abi.rs transcribes it (and build.rs checks it against the headers),
// is RFC 3416's: the codes above are what bsnmpd expects.
const _: () = {
    use crate::abi::*;
    assert!(ErrorStatus::NO_ERROR.0 == SNMP_ERR_NOERROR);
    assert!(ErrorStatus::NO_SUCH_NAME.0 == SNMP_ERR_NOSUCHNAME);
    assert!(ErrorStatus::GEN_ERR.0 == SNMP_ERR_GENERR);
    assert!(ErrorStatus::WRONG_TYPE.0 == SNMP_ERR_WRONG_TYPE);
    assert!(ErrorStatus::WRONG_VALUE.0 == SNMP_ERR_WRONG_VALUE);
    assert!(ErrorStatus::COMMIT_FAILED.0 == SNMP_ERR_COMMIT_FAILED);
    assert!(ErrorStatus::UNDO_FAILED.0 == SNMP_ERR_UNDO_FAILED);
    assert!(ErrorStatus::NOT_WRITABLE.0 == SNMP_ERR_NOT_WRITEABLE);
};

#[cfg(test)]
#[path = "error_status_tests.rs"]
mod tests;
