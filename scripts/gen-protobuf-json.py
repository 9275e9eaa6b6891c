#!/usr/bin/env python3
"""Generates src/apiserver/protobuf/*.rs: `ToJson` for the k8s-pb messages kcm decodes.

k8s-pb (prost) has the Kubernetes protobuf messages but no serde and no reflection, so
every message reachable from the kinds kcm serves gets an `impl ToJson` that names each
field with its JSON name. The JSON names are the protobuf field names, which prost turned
into snake case; the few that are not plain lowerCamel case (`hostIPC`, `podIP`, ...) are
taken from k8s-openapi's serde code for the same Kubernetes version.

Run it after changing the k8s-pb version or adding a row to the registry:

    python3 scripts/gen-protobuf-json.py && cargo fmt
"""

import glob
import os
import re
import sys

import registry

REGISTRY = glob.glob(os.path.expanduser("~/.cargo/registry/src/*/"))
K8S_PB = "k8s-pb-0.8.0"
K8S_OPENAPI = "k8s-openapi-0.25.0"
OUT = os.path.join(os.path.dirname(__file__), "..", "src", "apiserver", "protobuf")

# The kinds a protobuf body may hold: each registry row's message (its `protobuf` field in
# src/apiserver/resources.rs, read by registry.py), the kind of `/scale` and the options
# of a delete (src/apiserver/protobuf.rs decodes those two itself).
ROOTS = registry.protobuf_messages() + [
    "api::autoscaling::v1::Scale",
    "apimachinery::pkg::apis::meta::v1::DeleteOptions",
]

# Written by hand in protobuf.rs: their JSON is not their protobuf fields.
SPECIAL = {
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::Duration",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::api::resource::Quantity",
    "apimachinery::pkg::util::intstr::IntOrString",
    "apimachinery::pkg::runtime::RawExtension",
}

FIELD = re.compile(
    r"#\[prost\(([^\]]*)\)\]\s*pub\s+(?:r#)?(\w+)\s*:\s*(.*?),\s*(?=#\[prost|$)", re.S
)


def find(name):
    for root in REGISTRY:
        path = os.path.join(root, name)
        if os.path.isdir(path):
            return path
    sys.exit(f"{name} is not in the cargo registry: run `cargo fetch` first")


def parse_messages(src):
    """Every struct of k8s-pb: path -> [(field, prost attribute, rust type)]."""
    messages = {}
    for path in glob.glob(os.path.join(src, "**", "mod.rs"), recursive=True):
        module = os.path.relpath(os.path.dirname(path), src).replace(os.sep, "::")
        text = open(path).read()
        for match in re.finditer(r"\npub struct (\w+) \{\n(.*?)\n\}", text, re.S):
            body = "\n".join(
                l for l in match.group(2).splitlines() if not l.strip().startswith("//")
            )
            fields = [
                (f.group(2), f.group(1), re.sub(r"\s+", "", f.group(3)))
                for f in FIELD.finditer(body.strip())
            ]
            messages[f"{module}::{match.group(1)}"] = fields
    return messages


def resolve(module, rust_type):
    """The message path a field's type names, or None for a scalar."""
    inner = re.sub(r",>", ">", rust_type)
    inner = re.sub(r"^::core::option::Option<(.*)>$", r"\1", inner)
    inner = re.sub(r"^::prost::alloc::vec::Vec<(.*)>$", r"\1", inner)
    inner = re.sub(r"^::prost::alloc::collections::BTreeMap<[^,]*,(.*)>$", r"\1", inner)
    if inner.startswith("::") or inner in ("i32", "i64", "bool", "f64", "u8"):
        return None
    parts = module.split("::")
    segments = inner.split("::")
    while segments[0] == "super":
        parts.pop()
        segments.pop(0)
    return "::".join(parts + segments)


def reachable(messages):
    seen, todo = [], list(ROOTS)
    while todo:
        path = todo.pop()
        if path in seen or path in SPECIAL:
            continue
        seen.append(path)
        module = path.rsplit("::", 1)[0]
        for _, attr, rust_type in messages[path]:
            if attr.startswith("message") or "message" in attr:
                child = resolve(module, rust_type)
                if child:
                    todo.append(child)
    return sorted(seen)


def json_names(src, path):
    """The JSON field names of the k8s-openapi type for the k8s-pb message `path`, by their
    letters in lower case (prost's snake case loses the case of acronyms: `target_ww_ns`
    is `targetWWNs`), or None when k8s-openapi has no such type."""
    *module, name = path.split("::")
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    file = os.path.join(src, "src", "v1_32", *module, f"{snake}.rs")
    if not os.path.exists(file):
        return None
    names = re.findall(r'"(\w+)" => Field::Key_\w+,', open(file).read())
    return {json.lower(): json for json in names}


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def emit(messages, paths, openapi):
    files = {}
    for path in paths:
        group = "_".join(path.split("::")[-3:-1])
        names = json_names(openapi, path)
        entries = []
        for field, attr, _ in messages[path]:
            json = camel(field)
            if names is not None:
                # A field k8s-openapi's type does not have is a Go struct embedded
                # `json:",inline"` (Probe's ProbeHandler, Volume's VolumeSource): its fields
                # are the object's own, which the macro writes as the name "".
                # A scalar k8s-openapi's type lacks is newer than Kubernetes 1.32.
                json = names.get(field.replace("_", ""), "" if "message" in attr else json)
                if json == "":
                    print(f"inline: {path}.{field}", file=sys.stderr)
            rust = f"r#{field}" if field in ("type", "ref") else field
            if 'btree_map = "string, bytes"' in attr:
                # A map of bytes: base64 values (`protobuf::bytes_map`).
                rust = f"@bytes {rust}"
            elif "bytes" in attr:
                sys.exit(f"{path}.{field} is bytes: teach protobuf.rs and this script bytes")
            entries.append(f'"{json}": {rust}')
        lines, line = [f"    k8s_pb::{path} {{"], "       "
        for entry in entries:
            if len(line) + len(entry) + 2 > 96:
                lines.append(line)
                line = "       "
            line += f" {entry},"
        lines += [line, "    }"]
        files.setdefault(group, []).append("\n".join(lines))
    return files


def main():
    messages = parse_messages(os.path.join(find(K8S_PB), "src"))
    paths = reachable(messages)
    os.makedirs(OUT, exist_ok=True)
    for group, impls in emit(messages, paths, find(K8S_OPENAPI)).items():
        with open(os.path.join(OUT, f"{group}.rs"), "w") as out:
            out.write(
                f"//! `ToJson` for k8s-pb's {group.replace('_', '/')} messages that kcm decodes.\n"
                "//! Generated by scripts/gen-protobuf-json.py from k8s-pb's message fields and\n"
                "//! k8s-openapi's JSON names: do not edit.\n\n"
                "use super::to_json;\n\n"
                "to_json! {\n"
            )
            out.write("\n".join(impls))
            out.write("\n}\n")
    print(f"{len(paths)} messages", file=sys.stderr)


if __name__ == "__main__":
    main()
