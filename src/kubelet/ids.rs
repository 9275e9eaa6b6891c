//! The identifiers a simulated node makes up where a real one asks its container runtime
//! or its machine: image IDs and container IDs in `status.containerStatuses`, the machine
//! ID and system UUID in the Node's `status.nodeInfo`. The Kubernetes v1 schema requires
//! `imageID`, `machineID` and `systemUUID` (clients that validate, such as the official
//! Python client, refuse objects without them), so kcm writes plausible ones.
//!
//! kcm's scheme, all deterministic (the same input gives the same ID in every kcm build):
//! - `imageID`: `docker-pullable://{repository}@sha256:{64 hex}`, the shape a
//!   dockershim-era kubelet wrote: the repository is the image reference without its tag,
//!   and the digest is [`stand_in_digest`] of the whole reference; an image pinned by
//!   digest (`nginx@sha256:...`) keeps its own digest.
//! - `containerID`: `containerd://{64 hex}`, the shape a containerd kubelet writes, the
//!   hex a [`stand_in_digest`] of the pod's uid (its `namespace/name` when it has none),
//!   the container's name and its restart count: each restart is a new container.
//! - `machineID`: 32 hex digits, `systemUUID`: a UUID-shaped 8-4-4-4-12, both from the
//!   node's name, so a node keeps them across restarts as a machine does.
//!
//! None of these is a real content digest: [`stand_in_digest`] is FNV-1a, not SHA-256.
//! Nothing in kcm reads them back.

use std::fmt::Write as _;

/// The scheme of [`image_id`].
pub const IMAGE_ID_SCHEME: &str = "docker-pullable://";
/// The scheme of [`container_id`].
pub const CONTAINER_ID_SCHEME: &str = "containerd://";

/// 64 lowercase hex digits derived from `input`: four 64-bit FNV-1a hashes of it, each
/// seeded with its index. Stable across builds and platforms (unlike `std`'s hasher).
pub fn stand_in_digest(input: &str) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hex = String::with_capacity(64);
    for seed in 0u8..4 {
        let hash = std::iter::once(seed)
            .chain(input.bytes())
            .fold(OFFSET, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(PRIME)
            });
        write!(hex, "{hash:016x}").expect("writing to a String cannot fail");
    }
    hex
}

/// The `imageID` a node reports for a container of `image` once it is pulled (see the
/// module docs).
pub fn image_id(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) if digest.starts_with("sha256:") => (name, digest.to_string()),
        _ => (image, format!("sha256:{}", stand_in_digest(image))),
    };
    // A tag follows the last ':' unless a '/' comes after it (`host:5000/app` has a port).
    let repository = match name.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => repository,
        _ => name,
    };
    format!("{IMAGE_ID_SCHEME}{repository}@{digest}")
}

/// The `containerID` of container `container` of the pod `pod` (its uid, or
/// `namespace/name` without one) in its `restart_count`-th restart.
pub fn container_id(pod: &str, container: &str, restart_count: i64) -> String {
    let digest = stand_in_digest(&format!("{pod}\0{container}\0{restart_count}"));
    format!("{CONTAINER_ID_SCHEME}{digest}")
}

/// `nodeInfo.machineID` of node `node`: 32 hex digits (the form of `/etc/machine-id`).
pub fn machine_id(node: &str) -> String {
    stand_in_digest(&format!("machine-id\0{node}"))[..32].to_string()
}

/// `nodeInfo.systemUUID` of node `node`: a UUID-shaped string (the form of the DMI
/// product UUID).
pub fn system_uuid(node: &str) -> String {
    let hex = stand_in_digest(&format!("system-uuid\0{node}"));
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_hex(text: &str, digits: usize) -> bool {
        text.len() == digits
            && text
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    }

    #[test]
    fn digests_are_64_hex_stable_and_differ_by_input() {
        let digest = stand_in_digest("nginx:1");
        assert!(is_hex(&digest, 64), "{digest}");
        assert_eq!(digest, stand_in_digest("nginx:1"));
        assert_ne!(digest, stand_in_digest("nginx:2"));
        // Pinned (FNV-1a of the one seed byte 0), so that changing the hash, and with it
        // every ID kcm writes, is deliberate.
        assert_eq!(&stand_in_digest("")[..16], "af63bd4c8601b7df");
    }

    #[test]
    fn image_ids_name_the_repository_without_its_tag() {
        for (image, repository) in [
            ("nginx", "nginx"),
            ("nginx:1.27", "nginx"),
            (
                "registry.local:5000/team/app",
                "registry.local:5000/team/app",
            ),
            (
                "registry.local:5000/team/app:v2",
                "registry.local:5000/team/app",
            ),
        ] {
            let id = image_id(image);
            let expected = format!("docker-pullable://{repository}@sha256:");
            assert!(id.starts_with(&expected), "{image}: {id}");
            assert!(is_hex(&id[expected.len()..], 64), "{image}: {id}");
        }
        assert_ne!(image_id("nginx:1"), image_id("nginx:2"));
        let pinned = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            image_id(&format!("nginx:1@{pinned}")),
            format!("docker-pullable://nginx@{pinned}")
        );
    }

    #[test]
    fn container_ids_are_new_per_restart() {
        let first = container_id("uid-1", "web", 0);
        assert!(first.starts_with("containerd://"), "{first}");
        assert!(is_hex(&first["containerd://".len()..], 64), "{first}");
        assert_eq!(first, container_id("uid-1", "web", 0));
        assert_ne!(first, container_id("uid-1", "web", 1));
        assert_ne!(first, container_id("uid-1", "side", 0));
        assert_ne!(first, container_id("uid-2", "web", 0));
    }

    #[test]
    fn machine_ids_and_system_uuids_are_per_node() {
        let id = machine_id("node-1");
        assert!(is_hex(&id, 32), "{id}");
        assert_ne!(id, machine_id("node-2"));
        let uuid = system_uuid("node-1");
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{uuid}");
        assert!(uuid.split('-').all(|group| is_hex(group, group.len())));
        assert_ne!(uuid, system_uuid("node-2"));
    }
}
