//! The one check between two objects: whether two replication controllers' selectors
//! overlap ([`controllers_overlap`]), which 2014 never checked (kubernetes #2210).

use super::ReplicationController;
use crate::labels::Set;

/// Whether `selector`, a controller's selector, matches `labels`, as
/// `selector.as_selector().matches(labels)` does but without building the selector: each
/// pair `k: v` finds `v` at `k`, a missing key reading as `""` (2014's `hasTerm`).
pub fn selector_matches(selector: &Set, labels: &Set) -> bool {
    selector
        .iter()
        .all(|(key, value)| labels.get(key).unwrap_or("") == value)
}

/// The labels of a pod that two controllers would both count, if there is one: the
/// template labels of either controller, when the other's selector matches them. `a` and
/// `b` are each a controller's selector and template labels.
///
/// This is when two 2014 controllers fight (kubernetes #2210): a controller counts every
/// active pod its selector matches, so when one's pods match the other's selector, the
/// other counts them too and each resync deletes what the other created. Two selectors
/// that merely could both match some pod (`app=web` and `tier=fe`) do not fight while
/// neither's pods carry the other's labels, so they are not reported. An empty selector
/// (invalid: it would match every pod) overlaps nothing here; validation reports it.
pub fn pods_overlap<'a>(a: (&Set, &'a Set), b: (&Set, &'a Set)) -> Option<&'a Set> {
    let ((a_selector, a_labels), (b_selector, b_labels)) = (a, b);
    if a_selector.is_empty() || b_selector.is_empty() {
        return None;
    }
    if !a_labels.is_empty() && selector_matches(b_selector, a_labels) {
        Some(a_labels)
    } else if !b_labels.is_empty() && selector_matches(a_selector, b_labels) {
        Some(b_labels)
    } else {
        None
    }
}

/// The labels of a pod that both controllers would count ([`pods_overlap`]), when they are
/// two controllers of one namespace whose selectors overlap; `None` for a controller and
/// itself (same namespace and name), or controllers in two namespaces.
pub fn controllers_overlap<'a>(
    a: &'a ReplicationController,
    b: &'a ReplicationController,
) -> Option<&'a Set> {
    if a.metadata.namespace != b.metadata.namespace || a.metadata.name == b.metadata.name {
        return None;
    }
    pods_overlap(selection(a), selection(b))
}

/// A controller's selector and its template's labels (empty without a template).
pub fn selection(rc: &ReplicationController) -> (&Set, &Set) {
    static NO_LABELS: std::sync::OnceLock<Set> = std::sync::OnceLock::new();
    let labels = match &rc.spec.template {
        Some(template) => &template.metadata.labels,
        None => NO_LABELS.get_or_init(Set::new),
    };
    (&rc.spec.selector, labels)
}
