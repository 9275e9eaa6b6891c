//! What a simulated node makes of a pod's containers: which images fail to pull, crash or
//! never turn ready (chosen by image reference, because that is all `set image`
//! changes), and the status each step writes (`status.conditions`' `Ready`,
//! `status.containerStatuses`), as the later kubelet reports them
//! (`pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus`, `images/image_manager.go`'s
//! `ErrImagePull`/`ImagePullBackOff`, `kuberuntime`'s `CrashLoopBackOff`). Pure: the caller
//! passes the time; no IO.
//!
//! Every container status written carries `imageID` (required by the v1 schema): "" while
//! the image is not pulled (waiting to be created, or failing to pull), the image's
//! [`ids::image_id`] once the container started; and `containerID`
//! ([`ids::container_id`]) once a container ran, a new one per restart.

use std::time::{Duration, SystemTime};

use super::ids;
use crate::api::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodPhase, CONDITION_FALSE, CONDITION_TRUE, POD_READY,
};

/// The pod annotation (copied from the template) that overrides `--ready-delay`.
pub const READY_DELAY_ANNOTATION: &str = "kcm.io/ready-delay";
/// How long after `ErrImagePull` the node reports `ImagePullBackOff` (its first retry).
pub const PULL_RETRY: Duration = Duration::from_secs(2);
/// First crash-loop back-off; it doubles per restart up to [`MAX_CRASH_BACKOFF`].
pub const FIRST_CRASH_BACKOFF: Duration = Duration::from_secs(2);
/// Longest crash-loop back-off.
pub const MAX_CRASH_BACKOFF: Duration = Duration::from_secs(30);

/// Waiting reasons, as the kubelet writes them.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
const CONTAINER_CREATING: &str = "ContainerCreating";

/// How a container of a given image behaves. Ordered: a pod behaves as its worst
/// container.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImageClass {
    /// Runs and turns ready after the ready delay.
    Normal,
    /// Runs, never ready, no restarts.
    Unready,
    /// Runs with an address, never ready, restarts with a growing back-off.
    Crash,
    /// Never pulled: the pod stays Pending.
    PullFail,
}

/// Image reference globs (`*` matches any run of characters) choosing each class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRules {
    pub pull_fail: Vec<String>,
    pub crash: Vec<String>,
    pub unready: Vec<String>,
}

impl Default for ImageRules {
    fn default() -> ImageRules {
        ImageRules {
            pull_fail: parse_globs("*:fail*,*doesnotexist*"),
            crash: parse_globs("*:crash*"),
            unready: parse_globs("*:unready*"),
        }
    }
}

impl ImageRules {
    /// The class of `image`; pull failure first, then crash, then unready.
    pub fn class(&self, image: &str) -> ImageClass {
        let any = |globs: &[String]| globs.iter().any(|g| glob_match(g, image));
        if any(&self.pull_fail) {
            ImageClass::PullFail
        } else if any(&self.crash) {
            ImageClass::Crash
        } else if any(&self.unready) {
            ImageClass::Unready
        } else {
            ImageClass::Normal
        }
    }

    /// The class of the pod: that of its worst container.
    pub fn pod_class(&self, pod: &Pod) -> ImageClass {
        pod.spec
            .containers
            .iter()
            .map(|c| self.class(&c.image))
            .max()
            .unwrap_or(ImageClass::Normal)
    }
}

/// Splits a comma-separated list of globs, dropping empty entries.
pub fn parse_globs(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `text` matches `pattern`, in which `*` matches any run of characters
/// (including none) and every other character itself. Linear-time greedy matching with
/// backtracking to the last `*`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The pod's ready delay: its `kcm.io/ready-delay` annotation when present, else
/// `default`; an annotation that is not a duration is logged and `default` used.
pub fn ready_delay(pod: &Pod, default: Duration) -> Duration {
    parse_ready_delay(pod, default).unwrap_or_else(|e| {
        tracing::warn!("{e}");
        default
    })
}

/// [`ready_delay`] without the log.
///
/// # Errors
/// An annotation that is not a duration, with the reason.
fn parse_ready_delay(pod: &Pod, default: Duration) -> Result<Duration, String> {
    match pod.metadata.annotations.get(READY_DELAY_ANNOTATION) {
        None => Ok(default),
        Some(value) => humantime::parse_duration(value).map_err(|e| {
            format!(
                "pod {}: annotation {READY_DELAY_ANNOTATION}={value:?} is not a duration ({e}); using {}",
                pod.metadata.key(),
                humantime::format_duration(default)
            )
        }),
    }
}

/// The back-off before restart number `restarts + 1`: 2 s, doubling, at most 30 s.
pub fn crash_backoff(restarts: i64) -> Duration {
    let shift = u32::try_from(restarts.clamp(0, 16)).unwrap_or(16);
    FIRST_CRASH_BACKOFF
        .saturating_mul(1 << shift)
        .min(MAX_CRASH_BACKOFF)
}

/// How long is left of `delay` counted from the RFC 3339 time `since` at `now`; all of
/// it when `since` is absent or unreadable.
pub fn remaining(since: Option<&str>, delay: Duration, now: SystemTime) -> Duration {
    let Some(since) = since.and_then(|s| humantime::parse_rfc3339_weak(s).ok()) else {
        return delay;
    };
    let elapsed = now.duration_since(since).unwrap_or_default();
    delay.saturating_sub(elapsed)
}

/// The restart count the pod reports (the highest of its containers).
pub fn restart_count(pod: &Pod) -> i64 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.iter().map(|c| c.restart_count).max())
        .unwrap_or(0)
}

/// The first container's waiting reason, if any (what kubectl shows).
#[cfg(test)]
pub fn waiting_reason(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .find_map(|c| c.state.waiting_reason())
}

/// The waiting reason reported for the pod's first container whose image fails to pull
/// (`ErrImagePull`, `ImagePullBackOff`), if any.
pub fn pull_reason<'a>(pod: &'a Pod, rules: &ImageRules) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .filter(|c| rules.class(&c.image) == ImageClass::PullFail)
        .find_map(|c| c.state.waiting_reason())
}

/// The status fields the node writes: what the next step makes of `pod`.
pub struct Step<'a> {
    pub rules: &'a ImageRules,
    /// RFC 3339, seconds.
    pub now: &'a str,
}

impl Step<'_> {
    /// A pull-failing pod: still Pending, Ready=False, its failing containers waiting
    /// with `ErrImagePull` the first time and `ImagePullBackOff` after.
    pub fn pull_failed(&self, pod: &mut Pod) {
        let backoff = pull_reason(pod, self.rules).is_some();
        let statuses = self.statuses(pod, false, |class, image| match class {
            ImageClass::PullFail if backoff => waiting(
                IMAGE_PULL_BACK_OFF,
                format!("Back-off pulling image {image:?}"),
            ),
            ImageClass::PullFail => waiting(
                ERR_IMAGE_PULL,
                format!("failed to pull image {image:?}: the image matches --pull-fail-images"),
            ),
            _ => waiting(CONTAINER_CREATING, String::new()),
        });
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase = PodPhase::Pending;
        status.container_statuses = statuses;
        self.set_ready(pod, false);
    }

    /// The pod turns Running: every container running, ready now if `ready` (and its
    /// image lets it be).
    pub fn started(&self, pod: &mut Pod, ready: bool) {
        let now = self.now.to_string();
        let statuses = self.statuses(pod, true, |_, _| ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(now.clone()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase = PodPhase::Running;
        status.container_statuses = statuses;
        self.mark_ready(pod, ready);
    }

    /// The ready delay has passed: containers whose image allows it turn ready.
    pub fn became_ready(&self, pod: &mut Pod) {
        self.mark_ready(pod, true);
    }

    /// A crash-looping pod's containers crashed again: their restart count grows and they
    /// wait in `CrashLoopBackOff`.
    pub fn restarted(&self, pod: &mut Pod) {
        let rules = self.rules;
        let name = format!("{}_{}", pod.metadata.name, pod.metadata.namespace);
        let runtime_pod = runtime_pod(pod);
        if let Some(status) = pod.status.as_mut() {
            for container in &mut status.container_statuses {
                if rules.class(&container.image) == ImageClass::Crash {
                    container.restart_count += 1;
                    container.ready = false;
                    // The container of this restart ran and crashed.
                    container.container_id =
                        ids::container_id(&runtime_pod, &container.name, container.restart_count);
                    container.state = waiting(
                        CRASH_LOOP_BACK_OFF,
                        format!(
                            "back-off {} restarting failed container={} pod={name}",
                            humantime::format_duration(crash_backoff(container.restart_count)),
                            container.name
                        ),
                    );
                }
            }
        }
        self.set_ready(pod, false);
    }

    /// The simulated failure (`--fail-rate`): Ready=False, every container terminated.
    pub fn failed(&self, pod: &mut Pod) {
        let now = self.now.to_string();
        if let Some(status) = pod.status.as_mut() {
            for container in &mut status.container_statuses {
                container.ready = false;
                container.state = ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 1,
                        reason: "Error".into(),
                        finished_at: Some(now.clone()),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
            }
        }
        self.set_ready(pod, false);
    }

    /// Sets each container's `ready` (true only if `ready` and its image is Normal) and
    /// the pod's Ready condition from them.
    fn mark_ready(&self, pod: &mut Pod, ready: bool) {
        let rules = self.rules;
        let mut all = true;
        if let Some(status) = pod.status.as_mut() {
            for container in &mut status.container_statuses {
                container.ready = ready && rules.class(&container.image) == ImageClass::Normal;
                all &= container.ready;
            }
        }
        self.set_ready(pod, ready && all);
    }

    /// Container statuses for every container of the spec, keeping restart counts and
    /// unknown fields of those already reported; with `started`, each has its image's ID
    /// and a container ID (kept if it had one), else neither.
    fn statuses(
        &self,
        pod: &Pod,
        started: bool,
        state: impl Fn(ImageClass, &str) -> ContainerState,
    ) -> Vec<ContainerStatus> {
        let runtime_pod = runtime_pod(pod);
        let old = pod
            .status
            .as_ref()
            .map(|s| s.container_statuses.as_slice())
            .unwrap_or_default();
        pod.spec
            .containers
            .iter()
            .map(|c| {
                let mut status = old
                    .iter()
                    .find(|s| s.name == c.name && s.image == c.image)
                    .cloned()
                    .unwrap_or_default();
                status.name = c.name.clone();
                status.image = c.image.clone();
                if started {
                    status.image_id = ids::image_id(&c.image);
                    if status.container_id.is_empty() {
                        status.container_id =
                            ids::container_id(&runtime_pod, &c.name, status.restart_count);
                    }
                } else {
                    status.image_id.clear();
                    status.container_id.clear();
                }
                status.ready = false;
                status.state = state(self.rules.class(&c.image), &c.image);
                status
            })
            .collect()
    }

    /// Sets the Ready condition, moving `lastTransitionTime` only when the status changes
    /// (the reason and message name the unready containers, as the kubelet's do).
    fn set_ready(&self, pod: &mut Pod, ready: bool) {
        let status = pod.status.get_or_insert_with(Default::default);
        let unready: Vec<&str> = status
            .container_statuses
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.name.as_str())
            .collect();
        let (reason, message) = if ready {
            (String::new(), String::new())
        } else {
            (
                "ContainersNotReady".to_string(),
                format!("containers with unready status: [{}]", unready.join(" ")),
            )
        };
        let value = if ready {
            CONDITION_TRUE
        } else {
            CONDITION_FALSE
        };
        let index = match status.conditions.iter().position(|c| c.type_ == POD_READY) {
            Some(index) => index,
            None => {
                status.conditions.push(PodCondition {
                    type_: POD_READY.into(),
                    ..Default::default()
                });
                status.conditions.len() - 1
            }
        };
        let condition = &mut status.conditions[index];
        if condition.status != value || condition.last_transition_time.is_none() {
            condition.last_transition_time = Some(self.now.to_string());
        }
        condition.status = value.into();
        condition.reason = reason;
        condition.message = message;
    }
}

/// What a runtime knows the pod by, for its container IDs: its uid, or `namespace/name`
/// for a pod without one.
fn runtime_pod(pod: &Pod) -> String {
    if pod.metadata.uid.is_empty() {
        pod.metadata.key()
    } else {
        pod.metadata.uid.clone()
    }
}

fn waiting(reason: &str, message: String) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: reason.into(),
            message,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Container, ObjectMeta};

    #[test]
    fn globs_match_star_runs_and_nothing_else() {
        for (pattern, text, expected) in [
            ("*:fail*", "nginx:fail", true),
            ("*:fail*", "nginx:failing-2", true),
            ("*:fail*", "nginx:1.0", false),
            ("*:fail*", "fail", false),
            ("*doesnotexist*", "nginx:doesnotexist", true),
            ("*doesnotexist*", "doesnotexist", true),
            ("nginx", "nginx", true),
            ("nginx", "nginx:1", false),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("**x", "yyx", true),
            ("?", "a", false),
            ("ü*", "über", true),
        ] {
            assert_eq!(
                glob_match(pattern, text),
                expected,
                "{pattern:?} ~ {text:?}"
            );
        }
        assert_eq!(parse_globs(" a, ,b,"), ["a", "b"]);
    }

    #[test]
    fn image_classes_and_the_pods_worst() {
        let rules = ImageRules::default();
        assert_eq!(rules.class("nginx:1"), ImageClass::Normal);
        assert_eq!(rules.class("nginx:fail"), ImageClass::PullFail);
        assert_eq!(rules.class("nginx:doesnotexist"), ImageClass::PullFail);
        assert_eq!(rules.class("nginx:crash"), ImageClass::Crash);
        assert_eq!(rules.class("nginx:unready"), ImageClass::Unready);
        let p = pod(&["nginx:1", "b:unready", "c:crash"]);
        assert_eq!(rules.pod_class(&p), ImageClass::Crash);
        assert_eq!(rules.pod_class(&pod(&[])), ImageClass::Normal);
    }

    #[test]
    fn crash_backoff_doubles_from_2s_to_30s() {
        let secs: Vec<u64> = (0..7).map(|n| crash_backoff(n).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(crash_backoff(-1).as_secs(), 2);
        assert_eq!(crash_backoff(i64::MAX).as_secs(), 30);
    }

    #[test]
    fn ready_delay_comes_from_the_annotation_when_valid() {
        let mut p = pod(&["a"]);
        let default = Duration::from_secs(1);
        assert_eq!(ready_delay(&p, default), default);
        p.metadata
            .annotations
            .insert(READY_DELAY_ANNOTATION.into(), "5s".into());
        assert_eq!(ready_delay(&p, default), Duration::from_secs(5));
        p.metadata
            .annotations
            .insert(READY_DELAY_ANNOTATION.into(), "soon".into());
        let error = parse_ready_delay(&p, default).unwrap_err();
        assert!(
            error.contains("ns/p: annotation kcm.io/ready-delay=\"soon\" is not a duration"),
            "{error}"
        );
        assert_eq!(ready_delay(&p, default), default);
    }

    #[test]
    fn remaining_counts_from_the_transition() {
        let since = "2026-01-01T00:00:00Z";
        let t0 = humantime::parse_rfc3339(since).unwrap();
        let d = Duration::from_secs(5);
        assert_eq!(
            remaining(Some(since), d, t0 + Duration::from_secs(2)),
            Duration::from_secs(3)
        );
        assert_eq!(
            remaining(Some(since), d, t0 + Duration::from_secs(9)),
            Duration::ZERO
        );
        assert_eq!(remaining(None, d, t0), d);
        assert_eq!(remaining(Some("garbage"), d, t0), d);
    }

    fn pod(images: &[&str]) -> Pod {
        let mut pod = Pod {
            metadata: ObjectMeta::named("ns", "p"),
            ..Pod::default()
        };
        pod.spec.containers = images
            .iter()
            .enumerate()
            .map(|(i, image)| Container {
                name: format!("c{i}"),
                image: (*image).into(),
                ..Container::default()
            })
            .collect();
        pod
    }

    fn ready(pod: &Pod) -> (String, Option<String>) {
        let c = pod.status.as_ref().unwrap().ready_condition().unwrap();
        (c.status.clone(), c.last_transition_time.clone())
    }

    fn containers(pod: &Pod) -> Vec<(bool, i64, Option<&str>, bool)> {
        pod.status
            .as_ref()
            .unwrap()
            .container_statuses
            .iter()
            .map(|c| {
                (
                    c.ready,
                    c.restart_count,
                    c.state.waiting_reason(),
                    c.state.running.is_some(),
                )
            })
            .collect()
    }

    #[test]
    fn a_normal_pod_starts_unready_then_turns_ready_with_a_new_transition_time() {
        let rules = ImageRules::default();
        let mut p = pod(&["nginx:1"]);
        Step {
            rules: &rules,
            now: "T1",
        }
        .started(&mut p, false);
        assert_eq!(p.phase(), PodPhase::Running);
        assert_eq!(ready(&p), ("False".into(), Some("T1".into())));
        assert_eq!(containers(&p), [(false, 0, None, true)]);
        assert!(!p.is_ready());
        Step {
            rules: &rules,
            now: "T2",
        }
        .became_ready(&mut p);
        assert_eq!(ready(&p), ("True".into(), Some("T2".into())));
        assert_eq!(containers(&p), [(true, 0, None, true)]);
        assert_eq!(p.ready_since(), Some("T2"));
        // Ready again: the transition time stays.
        Step {
            rules: &rules,
            now: "T3",
        }
        .became_ready(&mut p);
        assert_eq!(ready(&p), ("True".into(), Some("T2".into())));
        // With no delay, Ready in the same write as Running.
        let mut q = pod(&["nginx:1"]);
        Step {
            rules: &rules,
            now: "T1",
        }
        .started(&mut q, true);
        assert_eq!((q.phase(), q.is_ready()), (PodPhase::Running, true));
    }

    #[test]
    fn a_pull_failing_pod_stays_pending_with_err_image_pull_then_back_off() {
        let rules = ImageRules::default();
        let mut p = pod(&["side:1", "nginx:doesnotexist"]);
        Step {
            rules: &rules,
            now: "T1",
        }
        .pull_failed(&mut p);
        assert_eq!(p.phase(), PodPhase::Pending);
        assert_eq!(
            containers(&p),
            [
                (false, 0, Some(CONTAINER_CREATING), false),
                (false, 0, Some(ERR_IMAGE_PULL), false)
            ]
        );
        let message = &p.status.as_ref().unwrap().container_statuses[1]
            .state
            .waiting
            .as_ref()
            .unwrap()
            .message;
        assert!(message.contains("matches --pull-fail-images"), "{message}");
        assert_eq!(pull_reason(&p, &rules), Some(ERR_IMAGE_PULL));
        Step {
            rules: &rules,
            now: "T2",
        }
        .pull_failed(&mut p);
        assert_eq!(pull_reason(&p, &rules), Some(IMAGE_PULL_BACK_OFF));
        assert_eq!(
            waiting_reason(&p),
            Some(CONTAINER_CREATING),
            "the first container's"
        );
        assert_eq!(ready(&p), ("False".into(), Some("T1".into())));
        assert!(!p.is_ready());
    }

    /// (imageID, containerID) of each container status.
    fn ids(pod: &Pod) -> Vec<(String, String)> {
        pod.status
            .as_ref()
            .unwrap()
            .container_statuses
            .iter()
            .map(|c| (c.image_id.clone(), c.container_id.clone()))
            .collect()
    }

    #[test]
    fn image_ids_once_started_and_a_new_container_id_per_restart() {
        let rules = ImageRules::default();
        let step = |now| Step { rules: &rules, now };
        // Never pulled: an empty imageID (required, so present) and no container.
        let mut pending = pod(&["side:1", "nginx:doesnotexist"]);
        step("T1").pull_failed(&mut pending);
        let none = (String::new(), String::new());
        assert_eq!(ids(&pending), [none.clone(), none]);
        let written = serde_json::to_value(&pending).unwrap();
        assert_eq!(written["status"]["containerStatuses"][1]["imageID"], "");

        let mut p = pod(&["app:crash", "side:1"]);
        p.metadata.uid = "uid-1".into();
        step("T1").started(&mut p, true);
        let started = ids(&p);
        assert_eq!(
            started,
            [
                (
                    ids::image_id("app:crash"),
                    ids::container_id("uid-1", "c0", 0)
                ),
                (ids::image_id("side:1"), ids::container_id("uid-1", "c1", 0)),
            ]
        );
        step("T2").became_ready(&mut p);
        assert_eq!(ids(&p), started, "readiness changes no ID");
        step("T3").restarted(&mut p);
        assert_eq!(
            ids(&p),
            [
                (
                    ids::image_id("app:crash"),
                    ids::container_id("uid-1", "c0", 1)
                ),
                started[1].clone(),
            ]
        );
        step("T4").failed(&mut p);
        assert_eq!(
            ids(&p)[1],
            started[1],
            "a terminated container keeps its ID"
        );

        // A pod without a uid (a 2014 document) is known by its key.
        let mut q = pod(&["nginx:1"]);
        step("T1").started(&mut q, true);
        assert_eq!(ids(&q)[0].1, ids::container_id("ns/p", "c0", 0));
    }

    #[test]
    fn crashing_and_unready_pods_run_but_never_turn_ready() {
        let rules = ImageRules::default();
        let mut p = pod(&["app:crash", "side:1"]);
        Step {
            rules: &rules,
            now: "T1",
        }
        .started(&mut p, true);
        assert_eq!((p.phase(), p.is_ready()), (PodPhase::Running, false));
        Step {
            rules: &rules,
            now: "T2",
        }
        .restarted(&mut p);
        Step {
            rules: &rules,
            now: "T3",
        }
        .restarted(&mut p);
        assert_eq!(
            containers(&p),
            [
                (false, 2, Some(CRASH_LOOP_BACK_OFF), false),
                (true, 0, None, true)
            ]
        );
        assert_eq!(restart_count(&p), 2);
        assert_eq!(ready(&p), ("False".into(), Some("T1".into())));
        let c = p.status.as_ref().unwrap().ready_condition().unwrap();
        assert_eq!(c.message, "containers with unready status: [c0]");
        Step {
            rules: &rules,
            now: "T4",
        }
        .became_ready(&mut p);
        assert!(!p.is_ready(), "a crashing container keeps the pod unready");

        let mut u = pod(&["app:unready"]);
        Step {
            rules: &rules,
            now: "T1",
        }
        .started(&mut u, true);
        Step {
            rules: &rules,
            now: "T2",
        }
        .became_ready(&mut u);
        assert_eq!((u.phase(), u.is_ready()), (PodPhase::Running, false));
        assert_eq!(containers(&u), [(false, 0, None, true)]);
    }
}
