//! The notification model: each notification of MEMSTAT-MIB, the objects it carries, and
//! the varbinds of its Notify PDU, built from the object registry (see [`super::object_oid`]).

use super::{object_oid, root, text, SourceStatus, Syntax, NOTIFICATIONS};
use crate::memstat::Allocator;
use crate::oid::Oid;
use crate::value::{Value, VarBind};

/// memstatNotifyObjects: the objects carried only in notifications.
pub(super) const NOTIFY_OBJECT_DEFS: &[(u32, &str, Syntax)] = &[
    (1, "memNotifyFailureIncrease", Syntax::Counter64),
    (2, "memNotifyLimitUsage", Syntax::Counter64),
    (3, "memNotifySuppressed", Syntax::Unsigned32),
];

/// A notification of MEMSTAT-MIB (memstatNotifications).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NotificationType {
    AllocFailure = 1,
    LimitNearing = 2,
    LimitCleared = 3,
    SourceStale = 4,
    SourceRecovered = 5,
    Suppressed = 6,
}

impl NotificationType {
    pub const ALL: [NotificationType; 6] = [
        NotificationType::AllocFailure,
        NotificationType::LimitNearing,
        NotificationType::LimitCleared,
        NotificationType::SourceStale,
        NotificationType::SourceRecovered,
        NotificationType::Suppressed,
    ];

    /// The NOTIFICATION-TYPE's name in the MIB.
    pub fn name(self) -> &'static str {
        match self {
            NotificationType::AllocFailure => "memTypeAllocFailure",
            NotificationType::LimitNearing => "memTypeLimitNearing",
            NotificationType::LimitCleared => "memTypeLimitCleared",
            NotificationType::SourceStale => "memSourceStale",
            NotificationType::SourceRecovered => "memSourceRecovered",
            NotificationType::Suppressed => "memNotificationsSuppressed",
        }
    }

    /// Its OID: the value of snmpTrapOID.0.
    pub fn oid(self) -> Oid {
        Oid(root(&[NOTIFICATIONS, self as u32]))
    }

    /// The names of its OBJECTS clause, in order (each varbind is one of them).
    pub fn objects(self) -> &'static [&'static str] {
        match self {
            NotificationType::AllocFailure => &[
                "memTypeName",
                "memTypeAllocator",
                "memTypeFailures",
                "memNotifyFailureIncrease",
            ],
            NotificationType::LimitNearing | NotificationType::LimitCleared => &[
                "memTypeName",
                "memTypeAllocator",
                "memNotifyLimitUsage",
                "memTypeCountLimit",
            ],
            NotificationType::SourceStale => {
                &["memSourceName", "memSourceStatus", "memSourceLastError"]
            }
            NotificationType::SourceRecovered => &["memSourceName", "memSourceStatus"],
            NotificationType::Suppressed => &["memNotifySuppressed"],
        }
    }
}

/// snmpTrapOID.0 (SNMPv2-MIB), the first varbind of every Notify we send.
pub const SNMP_TRAP_OID_0: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];

/// The varbinds of a notification's Notify PDU: snmpTrapOID.0 first (RFC 2741 §6.2.10; no
/// sysUpTime.0, which the master adds from its own clock, where we could only estimate it),
/// then one per object of its OBJECTS clause, built from the definitions above.
pub fn notification_varbinds(what: &Notification) -> Vec<VarBind> {
    let col = |name: &str, index: u32| -> Oid { instance(name, &[index]) };
    let scalar = |name: &str| -> Oid { instance(name, &[0]) };
    let notify = scalar;
    let row = |r: &NotifiedRow| {
        [
            (col("memTypeName", r.index), text(&r.name)),
            (
                col("memTypeAllocator", r.index),
                Value::Integer(r.allocator.number() as i32),
            ),
        ]
    };
    let mut v = vec![(
        Oid::from_slice(SNMP_TRAP_OID_0),
        Value::ObjectIdentifier(what.kind().oid()),
    )];
    match what {
        Notification::AllocFailure {
            row: r,
            failures,
            increase,
        } => {
            v.extend(row(r));
            v.push((col("memTypeFailures", r.index), Value::Counter64(*failures)));
            v.push((
                notify("memNotifyFailureIncrease"),
                Value::Counter64(*increase),
            ));
        }
        Notification::LimitNearing {
            row: r,
            usage,
            limit,
        }
        | Notification::LimitCleared {
            row: r,
            usage,
            limit,
        } => {
            v.extend(row(r));
            v.push((notify("memNotifyLimitUsage"), Value::Counter64(*usage)));
            v.push((col("memTypeCountLimit", r.index), Value::Counter64(*limit)));
        }
        Notification::SourceStale { source, error } => {
            v.push((scalar("memSourceName"), text(source)));
            v.push((
                scalar("memSourceStatus"),
                Value::Integer(SourceStatus::Stale as i32),
            ));
            v.push((scalar("memSourceLastError"), text(error)));
        }
        Notification::SourceRecovered { source } => {
            v.push((scalar("memSourceName"), text(source)));
            v.push((
                scalar("memSourceStatus"),
                Value::Integer(SourceStatus::Ok as i32),
            ));
        }
        Notification::Suppressed { count } => {
            v.push((notify("memNotifySuppressed"), Value::Gauge32(*count)));
        }
    }
    v.into_iter()
        .map(|(name, value)| VarBind { name, value })
        .collect()
}

/// The row a notification is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifiedRow {
    pub index: u32,
    pub name: String,
    pub allocator: Allocator,
}

/// One notification due, with the figures it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notification {
    AllocFailure {
        row: NotifiedRow,
        failures: u64,
        increase: u64,
    },
    LimitNearing {
        row: NotifiedRow,
        usage: u64,
        limit: u64,
    },
    LimitCleared {
        row: NotifiedRow,
        usage: u64,
        limit: u64,
    },
    SourceStale {
        source: String,
        error: String,
    },
    SourceRecovered {
        source: String,
    },
    Suppressed {
        count: u32,
    },
}

impl Notification {
    pub fn kind(&self) -> NotificationType {
        match self {
            Notification::AllocFailure { .. } => NotificationType::AllocFailure,
            Notification::LimitNearing { .. } => NotificationType::LimitNearing,
            Notification::LimitCleared { .. } => NotificationType::LimitCleared,
            Notification::SourceStale { .. } => NotificationType::SourceStale,
            Notification::SourceRecovered { .. } => NotificationType::SourceRecovered,
            Notification::Suppressed { .. } => NotificationType::Suppressed,
        }
    }
}

/// The OID of an instance of the object `name`, which the notification definitions name:
/// a typo there is a programming error that every notification test finds.
fn instance(name: &str, suffix: &[u32]) -> Oid {
    let mut oid = object_oid(name)
        .unwrap_or_else(|| panic!("{name} is no object of MEMSTAT-MIB"))
        .to_vec();
    oid.extend_from_slice(suffix);
    Oid(oid)
}
