"""Generates the JVM host's envelopes: a Java record (with a builder) for
every object the kernel's JSON Schemas define, an enum for every set of
string values, and a sealed interface for a union tagged by one of its
fields, all as hosts see them (host-shims/schemas.py).

jsonschema2pojo, the maintained generator, writes mutable beans, not
records; this one covers exactly the constructs the kernel's schemas use
(schemars' output) and stops at any other, so nothing is typed by guess.

    python3 host-shims/jvm/scripts/envelopes.py SCHEMAS OUT.java
"""

import json
import pathlib
import re
import sys

JAVA_WORDS = {"abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const", "continue", "default", "do",
              "double", "else", "enum", "extends", "final", "finally", "float", "for", "goto", "if", "implements", "import",
              "instanceof", "int", "interface", "long", "native", "new", "package", "private", "protected", "public", "return",
              "short", "static", "strictfp", "super", "switch", "synchronized", "this", "throw", "throws", "transient", "try",
              "void", "volatile", "while", "record", "var", "yield", "sealed", "permits"}
BOXED = {"int": "Integer", "long": "Long", "double": "Double", "boolean": "Boolean"}


class Unsupported(Exception):
    pass


def same(a: dict, b: dict) -> bool:
    """Two definitions of one name agree, whatever their descriptions and titles say."""
    def strip(schema, properties=False):
        if isinstance(schema, list):
            return [strip(s) for s in schema]
        if not isinstance(schema, dict):
            return schema
        # A `properties` map is named by its fields, which may be called `description`.
        return {k: strip(v, k == "properties") for k, v in schema.items() if properties or k not in ("description", "title")}

    return strip(a) == strip(b)


def camel(value: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", value)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def constant(value: str) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", value).strip("_").upper()
    return name if name and not name[0].isdigit() else "V_" + name


def escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("*/", "*&#47;").replace("@", "&#64;").replace("<", "&lt;").replace(">", "&gt;")


def doc(text: str, indent: str, params: tuple = ()) -> str:
    """A Javadoc comment: the schema's description, then one `@param` per described component."""
    lines = escaped(text).strip().splitlines() if text else []
    if lines and params:
        lines.append("")
    lines += [f"@param {name} {' '.join(escaped(d).split())}" for name, d in params]
    if not lines:
        return ""
    return indent + "/**\n" + "".join(f"{indent} * {line}".rstrip() + "\n" for line in lines) + indent + " */\n"


class Generator:
    def __init__(self) -> None:
        self.defs: dict[str, dict] = {}
        self.out: list[str] = []

    def add(self, name: str, schema: dict, where: str) -> None:
        if name in self.defs and not same(self.defs[name], schema):
            raise Unsupported(f"{where}: `{name}` is defined twice, differently")
        self.defs.setdefault(name, schema)

    # ---- what a schema is

    def strings(self, schema: dict):
        """The values of a set of strings (`enum`, or a `oneOf` of `const`s and `enum`s), else None."""
        if schema.get("type") == "string" and "enum" in schema:
            return list(schema["enum"])
        if "oneOf" in schema:
            values = []
            for v in schema["oneOf"]:
                if v.get("type") == "string" and "const" in v:
                    values.append(v["const"])
                elif v.get("type") == "string" and "enum" in v:
                    values += v["enum"]
                else:
                    return None
            return values
        return None

    def tag(self, schema: dict):
        """The field a `oneOf` of objects is tagged by (each variant's `const`), else None."""
        variants = schema.get("oneOf")
        if not variants or not all(v.get("type") == "object" for v in variants):
            return None
        common = set.intersection(*({k for k, p in v.get("properties", {}).items() if "const" in p} for v in variants))
        return sorted(common)[0] if len(common) == 1 else None

    def nullable(self, schema: dict):
        """(the schema without its null, True) for `anyOf [X, null]` or `type: [T, "null"]`."""
        if "anyOf" in schema and len(schema["anyOf"]) == 2 and {"type": "null"} in schema["anyOf"]:
            return next(s for s in schema["anyOf"] if s != {"type": "null"}), True
        t = schema.get("type")
        if isinstance(t, list) and "null" in t and len(t) == 2:
            return {**schema, "type": next(x for x in t if x != "null")}, True
        return schema, False

    def java(self, schema: dict, where: str) -> str:
        """The Java type of a schema; primitives where the value is always there."""
        schema, _ = self.nullable(schema)
        if "$ref" in schema:
            name = schema["$ref"].removeprefix("#/$defs/")
            target = self.defs[name]
            if self.kind(target) == "alias":
                return self.java(target, where)
            return name
        if schema is True or not set(schema) - {"description", "title", "default"}:
            return "JsonNode"  # any JSON value
        if self.strings(schema) is not None or isinstance(schema.get("const"), str):
            return "String"
        if "const" in schema:
            raise Unsupported(f"{where}: a constant that is not a string")
        t = schema.get("type")
        if t == "string":
            return "String"
        if t == "boolean":
            return "boolean"
        if t == "integer":
            # A uint32 does not fit an int; every integer of the contract fits a long (within ±(2^53 − 1)).
            return "int" if schema.get("format") in ("int32", "uint16", "uint8", "int16", "int8") else "long"
        if t == "number":
            return "double"
        if t == "array":
            return f"List<{self.boxed(self.java(schema.get('items', {}), where))}>"
        if t == "object":
            if "properties" in schema:
                raise Unsupported(f"{where}: an object with properties outside $defs")
            extra = schema.get("additionalProperties", True)
            return "JsonNode" if extra in (True, {}) else f"Map<String, {self.boxed(self.java(extra, where))}>"
        raise Unsupported(f"{where}: {json.dumps(schema)[:200]}")

    @staticmethod
    def boxed(java: str) -> str:
        return BOXED.get(java, java)

    def kind(self, schema: dict) -> str:
        if self.strings(schema) is not None:
            return "enum"
        if self.tag(schema):
            return "union"
        if schema.get("type") == "object" and "properties" in schema:
            return "record"
        return "alias"

    # ---- writing

    def emit(self) -> str:
        for name in sorted(self.defs):
            schema = self.defs[name]
            kind = self.kind(schema)
            if kind == "enum":
                self.enum(name, schema)
            elif kind == "union":
                self.union(name, schema)
            elif kind == "record":
                self.record(name, schema, "    ", "")
        return "".join(self.out)

    def enum(self, name: str, schema: dict) -> None:
        values = self.strings(schema)
        self.out.append(doc(schema.get("description", ""), "    "))
        self.out.append(f"    enum {name} {{\n")
        self.out.append(",\n".join(f'        @JsonProperty("{v}") {constant(v)}' for v in values) + ";\n\n")
        self.out.append(f'        /** The wire name, as in the JSON. */\n        @Override\n        public String toString() {{\n            return switch (this) {{\n')
        self.out.append("".join(f'                case {constant(v)} -> "{v}";\n' for v in values))
        self.out.append("            };\n        }\n    }\n\n")

    def union(self, name: str, schema: dict) -> None:
        field = self.tag(schema)
        variants = [(camel(v["properties"][field]["const"]), v) for v in schema["oneOf"]]
        self.out.append(doc(schema.get("description", ""), "    "))
        self.out.append(f'    @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, include = JsonTypeInfo.As.PROPERTY, property = "{field}")\n')
        self.out.append("    @JsonSubTypes({\n" + ",\n".join(
            f'        @JsonSubTypes.Type(value = {name}.{n}.class, name = "{v["properties"][field]["const"]}")' for n, v in variants) + "\n    })\n")
        self.out.append(f"    sealed interface {name} permits {', '.join(f'{name}.{n}' for n, _ in variants)} {{\n")
        for n, v in variants:
            inner = {**v, "properties": {k: p for k, p in v["properties"].items() if k != field},
                     "required": [r for r in v.get("required", []) if r != field]}
            self.record(n, inner, "        ", f" implements {name}")
        self.out.append("    }\n\n")

    def record(self, name: str, schema: dict, indent: str, implements: str) -> None:
        required = set(schema.get("required", []))
        fields = []
        for prop, sub in sorted(schema["properties"].items()):
            java = self.java(sub, f"{name}.{prop}")
            _, nullable = self.nullable(sub)
            if prop not in required or nullable:
                java = self.boxed(java)
            ident = prop + "_" if prop in JAVA_WORDS else prop
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident):
                raise Unsupported(f"{name}.{prop}: not a Java name")
            fields.append((prop, ident, java, sub.get("description", "")))
        self.out.append(doc(schema.get("description", ""), indent, tuple((i, d) for _, i, _, d in fields if d)))
        self.out.append(f"{indent}@JsonInclude(JsonInclude.Include.NON_NULL)\n")
        params = ",\n".join(f'{indent}        @JsonProperty("{p}") {j} {i}' for p, i, j, _ in fields)
        self.out.append(f"{indent}record {name}(\n{params}){implements} {{\n")
        # The builder: every component by name, what is left out null (the kernel's default).
        self.out.append(f"{indent}    public static Builder builder() {{\n{indent}        return new Builder();\n{indent}    }}\n\n")
        self.out.append(f"{indent}    public Builder toBuilder() {{\n{indent}        return new Builder()"
                        + "".join(f".{i}({i})" for _, i, _, _ in fields) + f";\n{indent}    }}\n\n")
        self.out.append(f"{indent}    public static final class Builder {{\n")
        for _, i, j, _ in fields:
            self.out.append(f"{indent}        private {self.boxed(j)} {i};\n")
        self.out.append(f"\n{indent}        private Builder() {{}}\n\n")
        primitive = {v: k for k, v in BOXED.items()}
        for _, i, j, _ in fields:
            self.out.append(f"{indent}        public Builder {i}({self.boxed(j)} {i}) {{\n{indent}            this.{i} = {i};\n{indent}            return this;\n{indent}        }}\n\n")
            # A number or flag also as a primitive, so `.limit(5)` needs no `5L`.
            if self.boxed(j) in primitive:
                self.out.append(f"{indent}        public Builder {i}({primitive[self.boxed(j)]} {i}) {{\n{indent}            this.{i} = {i};\n{indent}            return this;\n{indent}        }}\n\n")
        args = ", ".join(f"{i}" if j == self.boxed(j) else f"required({i}, \"{p}\")" for p, i, j, _ in fields)
        self.out.append(f"{indent}        public {name} build() {{\n{indent}            return new {name}({args});\n{indent}        }}\n{indent}    }}\n")
        self.out.append(f"{indent}}}\n\n")


HEADER = """// Generated from wit/schemas by host-shims/jvm/scripts/envelopes.py; do not edit.
package dev.ctxkernel;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;

/**
 * The kernel's requests and responses as Java records, each with a builder
 * (field names as on the wire; see {@code wit/schemas}). What a builder
 * leaves out is absent from the request; a field the kernel always sends is
 * a primitive, one it may leave out is boxed and null when absent.
 */
public interface Envelopes {
    /** A builder's value the schema requires, refused when missing. */
    private static <T> T required(T value, String field) {
        if (value == null) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "`" + field + "` is required", "{\\"field\\":\\"" + field + "\\"}", null);
        }
        return value;
    }

"""


def main(schemas: pathlib.Path, out: pathlib.Path) -> None:
    g = Generator()
    for path in sorted(schemas.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        for name, d in schema.get("$defs", {}).items():
            g.add(name, d, path.name)
        g.add(schema["title"], {k: v for k, v in schema.items() if k not in ("$defs", "$schema", "title")}, path.name)
    out.write_text(HEADER + g.emit().rstrip() + "\n}\n")


if __name__ == "__main__":
    try:
        main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    except Unsupported as e:
        sys.exit(f"envelopes.py: {e}")
