use super::*;

#[test]
fn snmp_codes_from_a_subagent_pass_through_and_agentx_codes_become_gen_err() {
    assert_eq!(
        ErrorStatus::from_agentx(ResError::WRONG_VALUE),
        ErrorStatus::WRONG_VALUE
    );
    assert_eq!(
        ErrorStatus::from_agentx(ResError::NOT_WRITABLE),
        ErrorStatus::NOT_WRITABLE
    );
    // The last SNMP code, inconsistentName, is the edge of the pass-through.
    assert_eq!(ErrorStatus::from_agentx(ResError::INCONSISTENT_NAME).0, 18);
    for agentx_only in [
        ResError::OPEN_FAILED,
        ResError::NOT_OPEN,
        ResError::PROCESSING_ERROR,
        ResError(19),
        ResError(999),
    ] {
        assert_eq!(
            ErrorStatus::from_agentx(agentx_only),
            ErrorStatus::GEN_ERR,
            "{agentx_only}"
        );
    }
    // noError is no error to report: whoever asks has one, and genErr is all that is known.
    assert_eq!(
        ErrorStatus::from_agentx(ResError::NO_ERROR),
        ErrorStatus::GEN_ERR
    );
}

#[test]
fn codes_show_their_rfc_3416_name_and_number() {
    assert_eq!(ErrorStatus::NOT_WRITABLE.to_string(), "notWritable");
    assert_eq!(format!("{:?}", ErrorStatus::GEN_ERR), "genErr(5)");
    assert_eq!(ErrorStatus(18).to_string(), "inconsistentName");
    assert_eq!(ErrorStatus(19).to_string(), "unknown(19)");
    assert_eq!(ErrorStatus(-1).name(), None);
}
