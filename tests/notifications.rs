//! Notifications end to end, through real programs: the daemon sends AgentX Notify PDUs to a
//! private net-snmp snmpd, which forwards them with `trap2sink` and `informsink` to two
//! private snmptrapds logging to files (Debian's snmptrapd package).
//!
//! Each test samples every 0.3 s (`--watch-interval`) with `--max-age 0.1`, so that every
//! sample reads the fixture, which the test rewrites. A check that nothing (more) was sent
//! first waits for the samples that could have sent it, by the daemon's `sample N taken`
//! debug line, and then reads memNotificationsSent: the daemon's own count, final once the
//! next sample was taken, where a sink's log could still be waiting for a packet.

mod common;

use common::*;
use memstat_agentx::memstat::{Allocator, MemoryType};
use std::path::{Path, PathBuf};
use std::time::Duration;

const N: &str = ".1.3.6.1.4.1.32473.1.0";
const ALLOC_FAILURE: &str = ".1.3.6.1.4.1.32473.1.0.1";
const LIMIT_NEARING: &str = ".1.3.6.1.4.1.32473.1.0.2";
const LIMIT_CLEARED: &str = ".1.3.6.1.4.1.32473.1.0.3";
const SOURCE_STALE: &str = ".1.3.6.1.4.1.32473.1.0.4";
const SOURCE_RECOVERED: &str = ".1.3.6.1.4.1.32473.1.0.5";
const SUPPRESSED: &str = ".1.3.6.1.4.1.32473.1.0.6";
const SENT: &str = ".1.3.6.1.4.1.32473.1.1.1.10.0";
const DROPPED: &str = ".1.3.6.1.4.1.32473.1.1.1.11.0";
const WAIT: Duration = PATIENCE;

/// snmpd with a trap2sink to one snmptrapd and an informsink to another, the daemon sampling
/// the fixture `types`, and the fixture's path.
struct Setup {
    daemon: Daemon,
    snmpd: Snmpd,
    traps: Snmptrapd,
    informs: Snmptrapd,
    fixture: PathBuf,
    // Last: removed after the programs using it are gone.
    _dir: tempfile::TempDir,
}

fn start(types: Vec<MemoryType>, extra: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let traps = Snmptrapd::start(dir.path(), "traps");
    let informs = Snmptrapd::start(dir.path(), "informs");
    let fixture = dir.path().join("fixture.json");
    write_fixture(&fixture, types);
    let snmpd = Snmpd::start_with_conf(
        dir.path(),
        Transport::Unix,
        "0660 0750",
        &format!(
            "trap2sink udp:127.0.0.1:{} public\ninformsink udp:127.0.0.1:{} public",
            traps.port, informs.port
        ),
    );
    let src = format!("fixture:{}", fixture.display());
    let state = dir.path().join("state").display().to_string();
    let mut args = vec![
        "--source",
        &src,
        "--state-dir",
        &state,
        "--watch-interval",
        "0.3",
        "--max-age",
        "0.1",
    ];
    args.extend_from_slice(extra);
    let daemon = Daemon::start(&snmpd, &args);
    Setup {
        _dir: dir,
        traps,
        informs,
        snmpd,
        daemon,
        fixture,
    }
}

impl Setup {
    /// Waits for `n` more samples to be taken (see [`Daemon::wait_samples`]): after a change
    /// of the fixture, the second has read it, and what it found has been sent by the third.
    fn samples(&self, n: u64) {
        self.daemon.wait_samples(n);
    }

    fn ours(&self, t: &Snmptrapd) -> Vec<Received> {
        t.received()
            .into_iter()
            .filter(|r| r.trap_oid.starts_with(N))
            .collect()
    }

    fn counter(&self, oid: &str) -> u64 {
        let l = get(self.snmpd.port, &[oid]);
        l[0].value.parse().unwrap_or_else(|_| panic!("{l:?}"))
    }

    fn context(&self) -> String {
        format!("daemon log:\n{}", self.daemon.log_text())
    }
}

fn zone(name: &str, failures: u64) -> MemoryType {
    let mut t = full_type(Allocator::Uma, name, 3);
    t.failures = Some(failures);
    t.count_limit = Some(0);
    t
}

fn col(c: u32, index: u32) -> String {
    format!("{TYPE_ENTRY}.{c}.{index}")
}

fn write(path: &Path, types: Vec<MemoryType>) {
    write_fixture(path, types);
}

/// A rise of the failure count gives exactly one memTypeAllocFailure, by trap and by inform,
/// with the row's name, allocator and failures and the increase; a second rise within the
/// holdoff gives none. The start, with non-zero failures, sent nothing: it is a baseline.
#[test]
fn a_failure_rise_notifies_once_with_its_increase_and_the_holdoff_holds() {
    let s = start(vec![zone("mbuf", 0), zone("mbuf_cluster", 7)], &[]);
    s.samples(3);
    assert_eq!(
        s.counter(SENT),
        0,
        "the baseline sent something\n{}",
        s.context()
    );
    assert!(
        s.ours(&s.traps).is_empty() && s.ours(&s.informs).is_empty(),
        "a baseline with non-zero failures sent something: {:?}\n{}",
        s.ours(&s.traps),
        s.context()
    );
    write(&s.fixture, vec![zone("mbuf", 0), zone("mbuf_cluster", 12)]);
    for sink in [&s.traps, &s.informs] {
        let got = sink.wait_for(ALLOC_FAILURE, 1, WAIT, &s.context());
        let n = &got[0];
        assert_eq!(n.value(&col(2, 2)), Some("mbuf_cluster"), "{n:?}");
        assert_eq!(
            n.value(&col(3, 2)),
            Some("2"),
            "memTypeAllocator uma(2): {n:?}"
        );
        assert_eq!(n.value(&col(17, 2)), Some("12"), "memTypeFailures: {n:?}");
        assert_eq!(
            n.value(".1.3.6.1.4.1.32473.1.1.5.1.0"),
            Some("5"),
            "memNotifyFailureIncrease: {n:?}"
        );
        // snmpTrapOID.0 right after the sysUpTime.0 that snmpd adds.
        assert_eq!(n.varbinds[0].oid, ".1.3.6.1.2.1.1.3.0");
        assert_eq!(n.varbinds[1].oid, ".1.3.6.1.6.3.1.1.4.1.0");
        assert_eq!(n.varbinds.len(), 6, "{n:?}");
    }
    // A second rise within the 300 s holdoff: nothing more.
    write(&s.fixture, vec![zone("mbuf", 0), zone("mbuf_cluster", 20)]);
    s.samples(4);
    for sink in [&s.traps, &s.informs] {
        let ours = s.ours(sink);
        assert_eq!(ours.len(), 1, "{ours:?}\n{}", s.context());
    }
    assert_eq!(s.counter(SENT), 1, "memNotificationsSent");
    assert_eq!(s.counter(DROPPED), 0, "memNotificationsDropped");
}

/// memTypeLimitNearing at 90 % of the count limit, nothing again while above 85 %, and
/// memTypeLimitCleared below 85 % (the default share and hysteresis). The figure compared
/// counts the free items cached in the per-CPU caches and the zone's bucket cache.
#[test]
fn the_limit_nears_and_clears_with_hysteresis() {
    let limited = |in_use: u64| {
        let mut t = zone("mbuf_cluster", 0);
        t.count_limit = Some(1000);
        t.in_use_count = Some(in_use);
        t.zone_free = Some(40);
        t.per_cpu.iter_mut().for_each(|c| c.cache_free = Some(5));
        t
    };
    let cached = 40 + 5 * full_type(Allocator::Uma, "x", 3).per_cpu.len() as u64;
    let s = start(vec![limited(100)], &["--notify-holdoff", "0"]);
    s.samples(2);
    write(&s.fixture, vec![limited(900 - cached)]);
    let got = s.traps.wait_for(LIMIT_NEARING, 1, WAIT, &s.context());
    assert_eq!(got[0].value(&col(2, 1)), Some("mbuf_cluster"));
    assert_eq!(got[0].value(&col(7, 1)), Some("1000"), "memTypeCountLimit");
    assert_eq!(
        got[0].value(".1.3.6.1.4.1.32473.1.1.5.2.0"),
        Some("900"),
        "memNotifyLimitUsage: in use plus cached free items"
    );
    // 86 %: inside the hysteresis, nothing.
    write(&s.fixture, vec![limited(860 - cached)]);
    s.samples(3);
    assert_eq!(s.counter(SENT), 1, "only the nearing\n{}", s.context());
    assert!(s.traps.of_type(LIMIT_CLEARED).is_empty(), "{}", s.context());
    assert_eq!(s.traps.of_type(LIMIT_NEARING).len(), 1);
    // 84 %: cleared.
    write(&s.fixture, vec![limited(840 - cached)]);
    let got = s.traps.wait_for(LIMIT_CLEARED, 1, WAIT, &s.context());
    assert_eq!(got[0].value(".1.3.6.1.4.1.32473.1.1.5.2.0"), Some("840"));
    s.informs.wait_for(LIMIT_CLEARED, 1, WAIT, &s.context());
    assert_eq!(s.informs.of_type(LIMIT_NEARING).len(), 1);
}

/// memSourceStale when a sampled refresh fails, with the error; memSourceRecovered when the
/// source reads again.
#[test]
fn stale_and_recovered() {
    let s = start(vec![zone("mbuf", 0)], &[]);
    s.samples(2);
    std::fs::write(&s.fixture, "{ not json").unwrap();
    let got = s.traps.wait_for(SOURCE_STALE, 1, WAIT, &s.context());
    let n = &got[0];
    assert_eq!(n.value(SOURCE_STATUS), Some("2"), "stale(2): {n:?}");
    let err = n.value(SOURCE_LAST_ERROR).unwrap_or_default();
    assert!(err.contains("fixture.json"), "memSourceLastError: {err:?}");
    assert!(
        n.value(".1.3.6.1.4.1.32473.1.1.1.7.0")
            .is_some_and(|v| v.starts_with("fixture:")),
        "memSourceName: {n:?}"
    );
    assert!(s.traps.of_type(SOURCE_RECOVERED).is_empty());
    write(&s.fixture, vec![zone("mbuf", 0)]);
    let got = s.traps.wait_for(SOURCE_RECOVERED, 1, WAIT, &s.context());
    assert_eq!(got[0].value(SOURCE_STATUS), Some("1"), "ok(1)");
    s.samples(3);
    assert_eq!(s.counter(SENT), 2, "one per change\n{}", s.context());
    assert_eq!(s.traps.of_type(SOURCE_STALE).len(), 1, "one per change");
    assert_eq!(s.traps.of_type(SOURCE_RECOVERED).len(), 1, "one per change");
    s.informs.wait_for(SOURCE_RECOVERED, 1, WAIT, &s.context());
}

/// 1,000 rows fail at once: the cap (20 by default) lets the first 20 through, in row
/// order, and one memNotificationsSuppressed carries the 980 left out.
#[test]
fn a_thousand_rows_failing_at_once_are_capped_with_a_summary() {
    let rows = |f: u64| -> Vec<MemoryType> {
        (0..1000)
            .map(|i| {
                let mut t = MemoryType::new(Allocator::Uma, format!("zone{i:04}"));
                t.failures = Some(f);
                t
            })
            .collect()
    };
    let s = start(rows(0), &[]);
    s.samples(2);
    write(&s.fixture, rows(1));
    let summary = s.traps.wait_for(SUPPRESSED, 1, WAIT, &s.context());
    assert_eq!(
        summary[0].value(".1.3.6.1.4.1.32473.1.1.5.3.0"),
        Some("980"),
        "memNotifySuppressed: {:?}",
        summary[0]
    );
    s.samples(3);
    let failures = s.traps.of_type(ALLOC_FAILURE);
    assert_eq!(failures.len(), 20, "the cap");
    let names: Vec<&str> = failures
        .iter()
        .map(|n| n.varbinds[2].value.as_str())
        .collect();
    let first: Vec<String> = (0..20).map(|i| format!("zone{i:04}")).collect();
    assert_eq!(names, first, "the first rows, in order");
    assert_eq!(s.traps.of_type(SUPPRESSED).len(), 1, "one summary");
    let ours = s.ours(&s.traps);
    assert_eq!(
        ours.last().unwrap().trap_oid,
        SUPPRESSED,
        "the summary comes last"
    );
    assert_eq!(s.counter(SENT), 21);
}

/// While the master is down, what the samples find is dropped, not queued, and counted in
/// memNotificationsDropped; the first sample after the reconnection is a baseline.
#[test]
fn a_master_restart_drops_and_counts_what_was_due_meanwhile() {
    let mut s = start(vec![zone("mbuf", 1)], &["--notify-holdoff", "0"]);
    s.samples(2);
    s.snmpd.stop();
    write(&s.fixture, vec![zone("mbuf", 4)]);
    // Samples go on without a master: the rise is found and dropped.
    s.daemon
        .wait_log("no master: dropped memTypeAllocFailure", 1);
    s.snmpd.restart();
    s.daemon.wait_registered(s.snmpd.port);
    s.samples(3);
    assert!(
        s.traps.of_type(ALLOC_FAILURE).is_empty(),
        "sent what was due while the master was down: {:?}",
        s.traps.of_type(ALLOC_FAILURE)
    );
    assert_eq!(s.counter(DROPPED), 1, "memNotificationsDropped");
    assert_eq!(s.counter(SENT), 0, "memNotificationsSent");
    // After the baseline, a new rise is sent again.
    write(&s.fixture, vec![zone("mbuf", 6)]);
    let got = s.traps.wait_for(ALLOC_FAILURE, 1, WAIT, &s.context());
    assert_eq!(
        got[0].value(".1.3.6.1.4.1.32473.1.1.5.1.0"),
        Some("2"),
        "counted from the baseline after the reconnection"
    );
}
