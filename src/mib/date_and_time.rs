//! SNMPv2-TC DateAndTime.

/// SNMPv2-TC DateAndTime in UTC (11 octets, direction '+', offset 0).
pub fn date_and_time(ms: u64) -> [u8; 11] {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian), per the well-known
    // era-based algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
    let y = year.to_be_bytes();
    [
        y[0],
        y[1],
        month,
        day,
        (rem / 3600) as u8,
        ((rem % 3600) / 60) as u8,
        (rem % 60) as u8,
        ((ms % 1000) / 100) as u8,
        b'+',
        0,
        0,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_and_time_is_utc() {
        // 2026-11-30 11:41:34.5 UTC
        let d = date_and_time(1_796_038_894_500);
        assert_eq!(&d[..8], &[0x07, 0xEA, 11, 30, 11, 41, 34, 5]);
    }
}
