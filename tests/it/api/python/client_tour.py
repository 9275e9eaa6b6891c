"""The official Python client (PyPI `kubernetes`) against kcm's Kubernetes API.

Lists every served kind with the client's typed methods (which deserialize into its
pydantic models, so a missing required field fails the call), reads one object of each,
and watches each kind until its first event. Prints one JSON line per kind:
{"kind": ..., "count": ..., "names": [...], "read": ..., "watched": ...}, then "ok".

Before that it creates a ConfigMap, a Secret (from stringData), a ServiceAccount and a
Lease in NAMESPACE through the client; after it, it creates, reads and deletes a
ConfigMap and a Secret and prints {"kind": "crud", ...}.

Usage: python3 client_tour.py KUBECONFIG [WATCH_SECONDS [NAMESPACE]]
Exits 0 when everything decoded and every kind had an object and a watch event; any
exception (a pydantic ValidationError included) exits non-zero with its traceback.
"""

import json
import sys

import kubernetes
from kubernetes import client, config, watch


def main():
    kubeconfig = sys.argv[1]
    watch_seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    namespace = sys.argv[3] if len(sys.argv) > 3 else "default"
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    coordination = client.CoordinationV1Api()

    def meta(name):
        return client.V1ObjectMeta(name=name, namespace=namespace)

    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=meta("py-config"), data={"a": "b"}))
    core.create_namespaced_secret(
        namespace, client.V1Secret(metadata=meta("py-secret"), string_data={"k": "v"}))
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=meta("py-sa")))
    coordination.create_namespaced_lease(
        namespace,
        client.V1Lease(metadata=meta("py-lease"),
                       spec=client.V1LeaseSpec(holder_identity="py",
                                               lease_duration_seconds=15)))

    # (served plural, list of every namespace, read one by (namespace, name))
    kinds = [
        ("pods", core.list_pod_for_all_namespaces,
         lambda ns, n: core.read_namespaced_pod(n, ns)),
        ("nodes", core.list_node, lambda ns, n: core.read_node(n)),
        ("services", core.list_service_for_all_namespaces,
         lambda ns, n: core.read_namespaced_service(n, ns)),
        ("endpoints", core.list_endpoints_for_all_namespaces,
         lambda ns, n: core.read_namespaced_endpoints(n, ns)),
        ("replicationcontrollers", core.list_replication_controller_for_all_namespaces,
         lambda ns, n: core.read_namespaced_replication_controller(n, ns)),
        ("replicasets", apps.list_replica_set_for_all_namespaces,
         lambda ns, n: apps.read_namespaced_replica_set(n, ns)),
        ("deployments", apps.list_deployment_for_all_namespaces,
         lambda ns, n: apps.read_namespaced_deployment(n, ns)),
        ("namespaces", core.list_namespace, lambda ns, n: core.read_namespace(n)),
        ("events", core.list_event_for_all_namespaces,
         lambda ns, n: core.read_namespaced_event(n, ns)),
        ("configmaps", core.list_config_map_for_all_namespaces,
         lambda ns, n: core.read_namespaced_config_map(n, ns)),
        ("secrets", core.list_secret_for_all_namespaces,
         lambda ns, n: core.read_namespaced_secret(n, ns)),
        ("serviceaccounts", core.list_service_account_for_all_namespaces,
         lambda ns, n: core.read_namespaced_service_account(n, ns)),
        ("leases", coordination.list_lease_for_all_namespaces,
         lambda ns, n: coordination.read_namespaced_lease(n, ns)),
    ]
    for plural, list_all, read_one in kinds:
        listed = list_all()
        names = sorted(
            "/".join(filter(None, [item.metadata.namespace, item.metadata.name]))
            for item in listed.items
        )
        if not listed.items:
            raise SystemExit(f"{plural}: the list is empty")
        first = listed.items[0]
        read = read_one(first.metadata.namespace, first.metadata.name)
        if read.metadata.uid != first.metadata.uid:
            raise SystemExit(f"{plural}: read {read.metadata.name} has another uid")
        watched = None
        for event in watch.Watch().stream(list_all, timeout_seconds=watch_seconds):
            # The stream yields the typed object (the model the list's items decode to).
            if type(event["object"]) is not type(first):
                raise SystemExit(
                    f"{plural}: watch gave a {type(event['object']).__name__}")
            watched = event["type"]
            break
        if watched is None:
            raise SystemExit(f"{plural}: no watch event within {watch_seconds}s")
        print(json.dumps({
            "kind": plural,
            "count": len(listed.items),
            "names": names,
            "read": read.metadata.name,
            "watched": watched,
        }), flush=True)
    # Create, read and delete a ConfigMap and a Secret.
    made = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=meta("scratch"), data={"x": "1"}))
    secret = core.create_namespaced_secret(
        namespace, client.V1Secret(metadata=meta("scratch"), string_data={"x": "1"}))
    read_map = core.read_namespaced_config_map("scratch", namespace)
    read_secret = core.read_namespaced_secret("scratch", namespace)
    if read_map.data != {"x": "1"} or read_map.metadata.uid != made.metadata.uid:
        raise SystemExit(f"scratch ConfigMap read back as {read_map}")
    if read_secret.data != {"x": "MQ=="} or read_secret.type != "Opaque":
        raise SystemExit(f"scratch Secret read back as {read_secret}")
    core.delete_namespaced_config_map("scratch", namespace)
    core.delete_namespaced_secret("scratch", namespace)
    gone = []
    for read in (core.read_namespaced_config_map, core.read_namespaced_secret):
        try:
            read("scratch", namespace)
        except client.exceptions.ApiException as e:
            gone.append(e.status)
    print(json.dumps({"kind": "crud", "secret_uid": secret.metadata.uid, "gone": gone}),
          flush=True)
    print(f"ok kubernetes {kubernetes.__version__}", flush=True)


if __name__ == "__main__":
    main()
