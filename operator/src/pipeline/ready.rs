//! The aggregate `Ready`: True (AllReady) exactly when every one of the steps'
//! [`SUB_CONDITIONS`] is True; `ExtraConfigHealthy` stays outside the aggregate (it reports on an
//! overlay the user owns and must not depool a Cinder whose API serves fine).

use super::step_name::SUB_CONDITIONS;
use crate::conditions::{Cond, is_true, kind, reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The aggregate Ready: True/AllReady exactly when all the sub-conditions are True, else
/// False/NotAllReady naming the ones that are not.
pub fn aggregate_ready(conditions: &[Condition]) -> Cond {
    let missing: Vec<&str> = SUB_CONDITIONS
        .iter()
        .copied()
        .filter(|t| !is_true(conditions, t))
        .collect();
    if missing.is_empty() {
        Cond::true_(
            kind::READY,
            reason::ALL_READY,
            "all sub-conditions are True",
        )
    } else {
        Cond::false_(
            kind::READY,
            reason::NOT_ALL_READY,
            format!("not ready: {}", missing.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{at, set_condition};

    #[test]
    fn ready_needs_all_fourteen_and_ignores_extra_config() {
        let mut cs = Vec::new();
        for t in SUB_CONDITIONS {
            set_condition(&mut cs, &Cond::true_(t, "X", ""), None, &at(1));
        }
        set_condition(
            &mut cs,
            &Cond::false_(
                kind::EXTRA_CONFIG_HEALTHY,
                reason::OWNED_KEYS_OVERRIDDEN,
                "",
            ),
            None,
            &at(1),
        );
        let ready = aggregate_ready(&cs);
        assert!(ready.status);
        assert_eq!(ready.reason, "AllReady");
        for t in SUB_CONDITIONS {
            let mut one_off = cs.clone();
            set_condition(&mut one_off, &Cond::false_(t, "Y", ""), None, &at(2));
            let r = aggregate_ready(&one_off);
            assert!(!r.status, "{t} False must make Ready False");
            assert_eq!(r.reason, "NotAllReady");
            assert!(r.message.contains(t));
        }
        let missing: Vec<_> = cs
            .iter()
            .filter(|c| c.type_ != kind::HPA_READY)
            .cloned()
            .collect();
        assert!(
            !aggregate_ready(&missing).status,
            "an unset sub-condition is not True"
        );
    }

    #[test]
    fn fourteen_distinct_sub_conditions() {
        let set: std::collections::HashSet<_> = SUB_CONDITIONS.iter().collect();
        assert_eq!(set.len(), 14);
        assert!(!set.contains(&kind::EXTRA_CONFIG_HEALTHY));
        assert!(!set.contains(&kind::READY));
    }
}
