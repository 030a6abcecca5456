//! The notifications of MEMSTAT-MIB on the wire: a NOTIFICATION-TYPE (its name, its arc and
//! its OBJECTS), a notification due with its values keyed by object, and the varbinds of its
//! Notify PDU, built from the object registry (see [`super::object_oid`]). When each one is
//! sent, and the settings that govern it, are defined with it in `agent::watch`.

use super::{object_oid, root, text, Syntax, NOTIFICATIONS};
use agentx_proto::oid::{Oid, SNMP_TRAP_OID_0};
use agentx_proto::value::{Value, VarBind};
use std::fmt;

/// memstatNotifyObjects: the objects carried only in notifications.
pub(super) const NOTIFY_OBJECT_DEFS: &[(u32, &str, Syntax)] = &[
    (1, "memNotifyFailureIncrease", Syntax::Counter64),
    (2, "memNotifyLimitUsage", Syntax::Counter64),
    (3, "memNotifySuppressed", Syntax::Unsigned32),
];

/// A NOTIFICATION-TYPE of MEMSTAT-MIB (under memstatNotifications).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NotificationType {
    name: &'static str,
    arc: u32,
    objects: &'static [&'static str],
}

impl NotificationType {
    /// The NOTIFICATION-TYPE `name`, `{ memstatNotifications arc }`, with its OBJECTS clause.
    pub(crate) const fn new(
        name: &'static str,
        arc: u32,
        objects: &'static [&'static str],
    ) -> NotificationType {
        NotificationType { name, arc, objects }
    }

    /// The NOTIFICATION-TYPE's name in the MIB.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Its OID: the value of snmpTrapOID.0.
    pub fn oid(self) -> Oid {
        Oid(root(&[NOTIFICATIONS, self.arc]))
    }

    /// The names of its OBJECTS clause, in order (each varbind is one of them).
    pub fn objects(self) -> &'static [&'static str] {
        self.objects
    }
}

impl fmt::Debug for NotificationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The row of memTypeTable a notification is about: the columns it carries are sent as
/// that row's instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifiedRow {
    pub index: u32,
}

/// One notification due, with the values it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    kind: NotificationType,
    row: Option<NotifiedRow>,
    /// Keyed by object, so that a value cannot land on the wrong object of the OBJECTS
    /// clause; the varbinds follow the clause's order, not this one.
    values: Vec<(&'static str, Value)>,
    /// Varbinds after the OBJECTS clause's (RFC 3416 §4.2.6): object, instance, value.
    extra: Vec<(&'static str, u32, Value)>,
}

impl Notification {
    /// A notification of `kind` (about `row`, when it carries columns of memTypeTable),
    /// without values yet: [`with`](Self::with) adds one per object.
    pub fn new(kind: NotificationType, row: Option<NotifiedRow>) -> Notification {
        Notification {
            kind,
            row,
            values: Vec::with_capacity(kind.objects.len()),
            extra: Vec::new(),
        }
    }

    /// The value of `object`, one of the objects of the OBJECTS clause.
    pub fn with(mut self, object: &'static str, value: Value) -> Notification {
        debug_assert!(
            self.kind.objects.contains(&object) && self.value(object).is_none(),
            "{object} is no object {:?} has left to carry",
            self.kind
        );
        self.values.push((object, value));
        self
    }

    /// A varbind after those of the OBJECTS clause: `object`'s `instance` (a one-index
    /// table's row), which says more than the clause can, such as which source it is about.
    pub(crate) fn also(
        mut self,
        object: &'static str,
        instance: u32,
        value: Value,
    ) -> Notification {
        self.extra.push((object, instance, value));
        self
    }

    /// The varbinds it carries after the OBJECTS clause's.
    #[cfg(test)]
    pub(crate) fn extra(&self) -> &[(&'static str, u32, Value)] {
        &self.extra
    }

    /// The value of a text `object` (an SnmpAdminString, cut to 255 octets as the MIB's
    /// readers get it).
    pub(crate) fn with_text(self, object: &'static str, s: &str) -> Notification {
        self.with(object, text(s))
    }

    pub fn kind(&self) -> NotificationType {
        self.kind
    }

    /// The value it carries for `object`.
    pub fn value(&self, object: &str) -> Option<&Value> {
        self.values
            .iter()
            .find_map(|(o, v)| (*o == object).then_some(v))
    }
}

/// The varbinds of a notification's Notify PDU: snmpTrapOID.0 first (RFC 2741 §6.2.10; no
/// sysUpTime.0, which the master adds from its own clock, where we could only estimate it),
/// then one per object of its OBJECTS clause, in the clause's order: a column of
/// memTypeTable as the instance of the notification's row, any other object as `.0`.
pub fn notification_varbinds(what: &Notification) -> Vec<VarBind> {
    let kind = what.kind;
    let entry = object_oid("memTypeEntry").expect("memTypeEntry is in the registry");
    let mut v = Vec::with_capacity(kind.objects.len() + 1);
    v.push(VarBind {
        name: Oid::from_slice(SNMP_TRAP_OID_0),
        value: Value::ObjectIdentifier(kind.oid()),
    });
    for &object in kind.objects {
        // The definitions name the objects: a typo, or a value left out, is a programming
        // error that every notification test finds.
        let oid =
            object_oid(object).unwrap_or_else(|| panic!("{object} is no object of MEMSTAT-MIB"));
        let value = what
            .value(object)
            .unwrap_or_else(|| panic!("{kind:?} carries no value for {object}"));
        let column = oid.len() == entry.len() + 1 && oid.starts_with(entry);
        let instance = if column {
            what.row
                .unwrap_or_else(|| panic!("{kind:?} carries the column {object} without a row"))
                .index
        } else {
            0
        };
        let mut name = oid.to_vec();
        name.push(instance);
        v.push(VarBind {
            name: Oid(name),
            value: value.clone(),
        });
    }
    for (object, instance, value) in &what.extra {
        let mut name = object_oid(object)
            .unwrap_or_else(|| panic!("{object} is no object of MEMSTAT-MIB"))
            .to_vec();
        name.push(*instance);
        v.push(VarBind {
            name: Oid(name),
            value: value.clone(),
        });
    }
    v
}
