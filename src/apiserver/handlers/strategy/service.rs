//! Services (`pkg/registry/core/service/strategy.go`): none of the per-kind rules apply
//! (kcm allocates no cluster IP; its port defaults are the served form's, `convert`),
//! so a Service is written as the generic store writes any kind.

use super::{no_defaults, Dependents, Strategy};
use crate::apiserver::convert::Kind;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::Service,
    defaults: no_defaults,
    keep_spec_fields: false,
    check_pod_spec: None,
    grace_period: None,
    dependents: Dependents::OwnerReferences,
    return_deleted_object: false,
};
