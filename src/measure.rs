//! The instruments `kcm bench` and `kcm lab` share: hand-drawn SVG line charts of their
//! figures ([`chart`]) and a TCP proxy in front of etcd whose connections can be cut and
//! restored (`proxy::CutProxy`). They know nothing of the scenarios that use them.

pub mod chart;
pub(crate) mod proxy;
