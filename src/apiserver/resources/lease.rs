//! Leases (`coordination.k8s.io/v1`; `pkg/registry/coordination/lease/strategy.go`,
//! `ValidateLeaseSpec`): the lock client-go's and kube-rs's leader election take and renew
//! with resourceVersion preconditions. A duration must be positive and the count of
//! transitions not negative.

use serde_json::Value;

use super::strategy::{cause, Strategy};
use crate::apiserver::errors::Cause;
use crate::apiserver::fields;
use crate::apiserver::table::{self, column, Cell, Printer, AGE, NAME};

pub(crate) static STRATEGY: Strategy = Strategy {
    prepare: |_| Ok(()),
    validate,
    delete: None,
};

/// printers.go's `printLease`: NAME, HOLDER, AGE.
pub(crate) static PRINTER: Printer = Printer {
    columns: &[
        NAME,
        column("Holder", "string", "", 0, "Who holds the Lease."),
        AGE,
    ],
    cells: |object| {
        let holder = fields::string_at(object, &["spec", "holderIdentity"]);
        let cells = vec![table::name(object), Cell::from(holder), table::age(object)];
        (cells, None)
    },
};

fn validate(object: &Value, _old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &object["spec"];
    if let Some(duration) = spec.get("leaseDurationSeconds").and_then(Value::as_i64) {
        if duration <= 0 {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.leaseDurationSeconds",
                format!("Invalid value: {duration}: must be greater than 0"),
            ));
        }
    }
    if let Some(transitions) = spec.get("leaseTransitions").and_then(Value::as_i64) {
        if transitions < 0 {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.leaseTransitions",
                format!("Invalid value: {transitions}: must be greater than or equal to 0"),
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_duration_is_positive_and_transitions_not_negative() {
        assert!(validate(
            &json!({"spec": {"leaseDurationSeconds": 15, "leaseTransitions": 0}}),
            None
        )
        .is_empty());
        let causes = validate(
            &json!({"spec": {"leaseDurationSeconds": -1, "leaseTransitions": -2}}),
            None,
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.leaseDurationSeconds", "spec.leaseTransitions"]
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: -1: must be greater than 0"
        );
    }
}
