#!/usr/bin/env python3
"""Regenerates the derived parts of config/descriptors/*.json.

- sdk.schemas embeds every schemas/<name>.schema.json (its content.schemas list);
- mcp.planes and sdk.capability_classes list every tool of schemas/tools/ under its plane and
  capability (tools are appended in file order; existing entries keep their order);
- every descriptor's content_hash is recomputed over its canonical JSON (sorted keys).

Until `mcp-root descriptors build` exists (descriptor pipeline issue), run this after
changing a schema, a tool contract or descriptor content:  python3 scripts/regen-descriptors.py
"""
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DESC = ROOT / "config" / "descriptors"


def canonical(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load(name):
    return json.loads((DESC / f"{name}.json").read_text())


def save(name, d):
    (DESC / f"{name}.json").write_text(json.dumps(d, indent=2, ensure_ascii=False) + "\n")


def main():
    contracts = [json.loads(p.read_text()) for p in sorted((ROOT / "schemas" / "tools").glob("*.json"))]

    schemas = load("sdk.schemas")
    for entry in schemas["content"].get("schemas", []):
        path = ROOT / "schemas" / f"{entry['name']}.schema.json"
        if path.exists():
            entry["schema"] = json.loads(path.read_text())

    planes = load("mcp.planes")
    by_plane = {p["name"]: p for p in planes["content"]["planes"]}
    caps = load("sdk.capability_classes")
    by_cap = {c["name"]: c for c in caps["content"]["capability_classes"]}
    missing = []
    for c in contracts:
        plane = by_plane.get(c["plane"])
        if plane is None:
            missing.append(f"{c['tool_id']}: plane {c['plane']} is not in mcp.planes")
        elif c["tool_id"] not in plane["tools"]:
            plane["tools"].append(c["tool_id"])
        cap = by_cap.get(c["required_capability"])
        if cap is None:
            missing.append(f"{c['tool_id']}: capability {c['required_capability']} is not in sdk.capability_classes")
        elif c["tool_id"] not in cap["tools"]:
            cap["tools"].append(c["tool_id"])
    for name, d in [("sdk.schemas", schemas), ("mcp.planes", planes), ("sdk.capability_classes", caps)]:
        save(name, d)

    for p in sorted(DESC.glob("*.json")):
        d = json.loads(p.read_text())
        d["content_hash"] = "sha256:" + hashlib.sha256(canonical(d["content"]).encode()).hexdigest()
        p.write_text(json.dumps(d, indent=2, ensure_ascii=False) + "\n")
    if missing:
        print("\n".join(missing), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
