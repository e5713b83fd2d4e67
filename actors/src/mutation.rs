//! Interior mutations: the changes a kind accepts while the resource is only read-held
//! (backends: capacity bookkeeping, so many volumes are created on one backend at once). Each is a
//! variant with typed arguments, called as a method of its kind's result
//! ([`crate::results::BackendResult::reserve_capacity`]) and applied by the resource's actor, whose
//! mailbox serializes it with every other change of the value.

use crate::kind::Kind;
use serde_json::Value;

/// One interior mutation with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Backend: adds `bytes` to `reservedBytes`, refusing to exceed `capacityBytes` when the
    /// backend declares one.
    ReserveCapacity {
        /// Bytes to reserve.
        bytes: u64,
    },
    /// Backend: subtracts `bytes` from `reservedBytes` (not below zero).
    ReleaseCapacity {
        /// Bytes to give back.
        bytes: u64,
    },
}

impl Mutation {
    /// The kind that accepts it.
    pub fn kind(self) -> Kind {
        match self {
            Mutation::ReserveCapacity { .. } | Mutation::ReleaseCapacity { .. } => Kind::Backend,
        }
    }

    /// Its name in errors and traces.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::ReserveCapacity { .. } => "reserve_capacity",
            Mutation::ReleaseCapacity { .. } => "release_capacity",
        }
    }

    /// Applies it to `value` in place, or refuses with a reason (the value is then unchanged).
    pub(crate) fn apply(self, value: &mut Value) -> Result<(), String> {
        match self {
            Mutation::ReserveCapacity { bytes } => reserve_capacity(value, bytes),
            Mutation::ReleaseCapacity { bytes } => release_capacity(value, bytes),
        }
    }
}

fn reserved(obj: &serde_json::Map<String, Value>) -> u64 {
    obj.get("reservedBytes")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn reserve_capacity(value: &mut Value, bytes: u64) -> Result<(), String> {
    let obj = value
        .as_object_mut()
        .ok_or("backend value is not an object")?;
    let reserved = reserved(obj);
    let wanted = reserved.checked_add(bytes).ok_or("reservation overflows")?;
    if let Some(capacity) = obj.get("capacityBytes").and_then(Value::as_u64)
        && wanted > capacity
    {
        return Err(format!(
            "{bytes} bytes do not fit: {reserved} of {capacity} reserved"
        ));
    }
    obj.insert("reservedBytes".to_string(), Value::from(wanted));
    Ok(())
}

fn release_capacity(value: &mut Value, bytes: u64) -> Result<(), String> {
    let obj = value
        .as_object_mut()
        .ok_or("backend value is not an object")?;
    let left = reserved(obj).saturating_sub(bytes);
    obj.insert("reservedBytes".to_string(), Value::from(left));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_capacity_respects_capacity() {
        let mut v = serde_json::json!({"capacityBytes": 10});
        Mutation::ReserveCapacity { bytes: 6 }
            .apply(&mut v)
            .unwrap();
        let refused = Mutation::ReserveCapacity { bytes: 6 }.apply(&mut v);
        assert_eq!(
            refused,
            Err("6 bytes do not fit: 6 of 10 reserved".to_string())
        );
        Mutation::ReleaseCapacity { bytes: 2 }
            .apply(&mut v)
            .unwrap();
        assert_eq!(v["reservedBytes"], 4);
        Mutation::ReleaseCapacity { bytes: 9 }
            .apply(&mut v)
            .unwrap();
        assert_eq!(v["reservedBytes"], 0);
        assert!(
            Mutation::ReserveCapacity { bytes: 1 }
                .apply(&mut serde_json::json!([]))
                .is_err()
        );
    }
}
