#!/usr/bin/env python3
"""Generates src/apiserver/openapi/k8s-1.32.json: the OpenAPI schemas of the kinds kcm serves.

The source is PyPI's `kubernetes-validate` 1.37.0, whose wheel carries the schemas of every
Kubernetes release as JSON Schema (`kubernetes-json-schema/v1.32.0-local/_definitions.json`,
under `$defs`). Its form is the published OpenAPI one turned into JSON Schema: `"type":
["string", "null"]` where the published schema says `"type": "string"`, `$ref:
"#/$defs/NAME"` where it says `#/definitions/NAME`, IntOrString and Quantity as `oneOf` two
types, and the `x-kubernetes-*` extensions kept. This script turns it back into OpenAPI v3
form (`#/components/schemas/NAME`, one plain `type`), keeps what a schema says about a
field's shape (types, formats, required fields, enums, defaults, additional properties,
`x-kubernetes-*`), drops every `description` (kcm carries no text from Kubernetes), and
keeps only the definitions reachable from the kinds kcm serves (ROOTS).

The output holds one definition a line, sorted, so a regeneration diffs by definition.
src/apiserver/openapi.rs serves it (v3 as it is, v2 with `#/definitions/` references) and
src/apiserver/openapi/validate.rs validates objects against it.

Run it after adding a row to the registry (it reads the served kinds from there):

    python3 scripts/gen-openapi.py

It downloads the wheel with `pip download` into a temporary directory; pass `--wheel PATH`
to read a wheel (or its unpacked directory) already on disk instead.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import registry

PACKAGE = "kubernetes-validate"
PACKAGE_VERSION = "1.37.0"
KUBERNETES_VERSION = "v1.32.0"
MEMBER = f"kubernetes_validate/kubernetes-json-schema/{KUBERNETES_VERSION}-local/_definitions.json"
OUT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "src", "apiserver", "openapi", "k8s-1.32.json"
)

# The kinds kcm serves and their lists, read from its registry (src/apiserver/resources.rs,
# by registry.py), then the kinds of their subresources and the meta kinds every API
# answers with. Table is not among the published definitions.
ROOTS = registry.openapi_kinds() + [
    "io.k8s.api.autoscaling.v1.Scale",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
]

# Keys of a schema that describe shape; anything else (description, title, externalDocs,
# examples) is dropped.
KEPT = {
    "type", "format", "required", "enum", "default", "items", "properties",
    "additionalProperties", "$ref", "oneOf", "minimum", "maximum", "pattern",
    "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "nullable",
}


def read_definitions(wheel):
    """The `$defs` of `_definitions.json` in `wheel` (a .whl file or an unpacked one)."""
    if os.path.isdir(wheel):
        path = os.path.join(wheel, MEMBER)
        if not os.path.exists(path):
            path = os.path.join(wheel, MEMBER.split("/", 1)[1])
        with open(path) as f:
            return json.load(f)["$defs"]
    with zipfile.ZipFile(wheel) as z:
        return json.loads(z.read(MEMBER))["$defs"]


def download(directory):
    """Downloads the wheel with pip into `directory` and returns its path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--dest", directory, f"{PACKAGE}=={PACKAGE_VERSION}"],
        check=True,
    )
    (wheel,) = glob.glob(os.path.join(directory, "*.whl"))
    return wheel


def plain_type(value):
    """`["string", "null"]` → `"string"`."""
    if isinstance(value, list):
        kinds = [t for t in value if t != "null"]
        if len(kinds) != 1:
            raise ValueError(f"a type of several kinds: {value}")
        return kinds[0]
    return value


def convert(schema, name):
    """One JSON Schema node back in OpenAPI v3 form, without text."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key == "$ref":
            prefix = "#/$defs/"
            assert value.startswith(prefix), value
            out[key] = "#/components/schemas/" + value[len(prefix):]
        elif key == "type":
            out[key] = plain_type(value)
        elif key == "properties":
            out[key] = {field: convert(sub, name) for field, sub in value.items()}
            # The source pins every kind's `apiVersion` and `kind` with a one-value enum;
            # the published schema does not (a kind's list of group-version-kinds says it).
            for field in ("apiVersion", "kind"):
                out[key].get(field, {}).pop("enum", None)
        elif key in ("items", "additionalProperties"):
            out[key] = convert(value, name) if isinstance(value, dict) else value
        elif key == "oneOf":
            out[key] = [convert(sub, name) for sub in value]
        elif key.startswith("x-kubernetes-") or key in KEPT:
            out[key] = value
    if name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
        # The published form: either type, marked as Kubernetes marks it.
        out["format"] = "int-or-string"
        out["x-kubernetes-int-or-string"] = True
    return out


def references(schema):
    """The definition names `schema` refers to."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref":
                yield value.rsplit("/", 1)[1]
            else:
                yield from references(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from references(value)


def closure(definitions):
    """The definitions reachable from ROOTS."""
    seen, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in definitions:
            raise KeyError(f"{name} is not in the source")
        seen.add(name)
        todo.extend(references(definitions[name]))
    return sorted(seen)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--wheel", help="a kubernetes-validate wheel (or its unpacked directory)")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    if args.wheel:
        definitions = read_definitions(args.wheel)
    else:
        with tempfile.TemporaryDirectory() as directory:
            definitions = read_definitions(download(directory))
    schemas = {name: convert(definitions[name], name) for name in closure(definitions)}
    lines = [
        "{",
        f' "source": {json.dumps(f"PyPI {PACKAGE} {PACKAGE_VERSION}, {KUBERNETES_VERSION}, without descriptions; scripts/gen-openapi.py")},',
        ' "schemas": {',
    ]
    for i, (name, schema) in enumerate(schemas.items()):
        comma = "," if i + 1 < len(schemas) else ""
        lines.append(f"  {json.dumps(name)}: {json.dumps(schema, sort_keys=True, separators=(',', ':'))}{comma}")
    lines += [" }", "}"]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(schemas)} definitions to {os.path.relpath(args.out)}")


if __name__ == "__main__":
    main()
