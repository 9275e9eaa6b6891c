//! Endpoints (`pkg/registry/core/endpoint/strategy.go`): no spec (so no generation), no
//! defaults; written as the generic store writes any kind (kcm's endpoints controller
//! is their usual writer).

use super::{no_defaults, Dependents, Strategy};
use crate::apiserver::convert::Kind;

pub(super) static STRATEGY: Strategy = Strategy {
    kind: Kind::Endpoints,
    defaults: no_defaults,
    keep_spec_fields: false,
    check_pod_spec: None,
    grace_period: None,
    dependents: Dependents::OwnerReferences,
    return_deleted_object: false,
};
