"""The served kinds, read from the registry (src/apiserver/resources.rs), for the scripts
that generate what each served kind needs (gen-openapi.py, gen-protobuf-json.py): a kind
added as a registry row is picked up by both without editing them.
"""

import os
import re

RESOURCES_RS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "src", "apiserver", "resources.rs"
)

# The first label of a group, as Kubernetes' Go packages and OpenAPI definitions name it.
GROUP_PACKAGES = {"CORE_GROUP": "core", '""': "core"}


def rows():
    """Each `Resource { ... }` row of `RESOURCES`: a dict of its `field: value` lines."""
    with open(RESOURCES_RS) as f:
        source = f.read()
    table = source[source.index("pub(crate) static RESOURCES"):]
    table = table[: table.index("\n];")]
    found = []
    for block in table.split("    Resource {")[1:]:
        fields = dict(re.findall(r"^\s{8}(\w+): (.*?),?$", block, re.M))
        found.append(fields)
    return found


def package(group):
    """`core` for the core group, else the group's first label (`apps`, `coordination`)."""
    if group in GROUP_PACKAGES:
        return GROUP_PACKAGES[group]
    return group.strip('"').split(".")[0]


def openapi_kinds():
    """The OpenAPI definition names of every served kind and its list
    (`io.k8s.api.core.v1.Pod`, `io.k8s.api.core.v1.PodList`)."""
    names = []
    for row in rows():
        prefix = f"io.k8s.api.{package(row['group'])}.{row['version'].strip(chr(34))}"
        names.append(f"{prefix}.{row['kind'].strip(chr(34))}")
        names.append(f"{prefix}.{row['list_kind'].strip(chr(34))}")
    return names


def protobuf_messages():
    """The k8s-pb message each row decodes protobuf bodies as (`api::core::v1::Pod`)."""
    messages = []
    for row in rows():
        found = re.fullmatch(r"Some\(json_of::<([\w:]+)>\)", row.get("protobuf", "None"))
        if found:
            messages.append(f"api::{found.group(1)}")
    return messages


if __name__ == "__main__":
    print("\n".join(openapi_kinds()))
    print("\n".join(protobuf_messages()))
