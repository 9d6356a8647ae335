//! The input envelope `{"payload","secrets","permissions","action"}` as zero-copy views.

use crate::{Kind, Str, Value};

/// A member the host left out reads as JSON `null`.
#[derive(Clone, Copy)]
pub struct Envelope<'a> {
    pub payload: Value<'a>,
    pub secrets: Value<'a>,
    pub permissions: Value<'a>,
    pub action: Value<'a>,
}

impl<'a> Envelope<'a> {
    /// None unless `root` is an object.
    pub fn from_root(root: Value<'a>) -> Option<Envelope<'a>> {
        if root.kind() != Kind::Object {
            return None;
        }
        let member = |key: &str| root.get(key).unwrap_or(Value::NULL);
        Some(Envelope {
            payload: member("payload"),
            secrets: member("secrets"),
            permissions: member("permissions"),
            action: member("action"),
        })
    }

    /// The secret `key` (still JSON-escaped; compare or copy it through `Str`), or None when
    /// the host did not inject it (no `read_secret:` permission, or never set).
    pub fn secret(&self, key: &str) -> Option<Str<'a>> {
        self.secrets.get(key).and_then(|value| value.as_str())
    }

    /// Whether the approved permissions include `permission` exactly.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.permissions
            .items()
            .any(|granted| granted.as_str().map_or(false, |text| text.eq_str(permission)))
    }
}
