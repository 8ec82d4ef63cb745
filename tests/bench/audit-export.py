"""Writes a verifiable audit export of N synthetic events, chained as root chains them
(sha256(prev_hash "\\n" canonical JSON)), and a C2SP checkpoint of all of them signed with a
fresh Ed25519 key, for `audit-export.sh` to time `mcp-root audit verify-export` on.

    python3 tests/bench/audit-export.py N DIR

Writes DIR/trail.jsonl and DIR/checkpoint.txt; prints the verifier key. The Merkle root is
RFC 6962's (leaf data: each event's chain hash), computed here independently of root's code.
"""

import base64
import hashlib
import json
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ORIGIN = "root-mcp/bench"


def canonical(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def mth(leaves: list) -> bytes:
    """RFC 6962 Merkle tree hash of leaf hashes, iteratively (largest power of two splits)."""
    level = leaves
    # Pairwise up the tree; an odd node is carried up unchanged (equivalent to RFC 6962's split).
    while len(level) > 1:
        nxt = [hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0] if level else hashlib.sha256(b"").digest()


def main(n: int, out: str) -> None:
    prev = "0" * 64
    leaves = []
    with open(f"{out}/trail.jsonl", "w") as f:
        for seq in range(1, n + 1):
            event = {
                "event_id": f"01a2{seq:028x}",
                "trace_id": f"{seq:032x}",
                "tool_id": "hub.get_status",
                "target_id": f"hub:bench-{seq % 500}",
                "status": "ok",
                "surface": "mcp",
                "actor": {"kind": "lease", "id": f"lease:{seq % 97:08x}"},
                "capability": "infra.read.status",
                "started_at": "2026-12-06T12:00:00Z",
                "duration_ms": seq % 50,
                "policy_decision": {"decision": "allow", "checks": ["destructive_refusal", "capability_grant"]},
                "result_summary": "healthy",
            }
            h = hashlib.sha256((prev + "\n" + canonical(event)).encode()).hexdigest()
            f.write(json.dumps({"seq": seq, "prev_hash": prev, "hash": h, "event": event}, separators=(",", ":")) + "\n")
            leaves.append(hashlib.sha256(b"\x00" + bytes.fromhex(h)).digest())
            prev = h
    root = mth(leaves)
    key = Ed25519PrivateKey.generate()
    public = b"\x01" + key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = hashlib.sha256(ORIGIN.encode() + b"\n" + public).digest()[:4]
    text = f"{ORIGIN}\n{n}\n{base64.b64encode(root).decode()}\n"
    sig = base64.b64encode(key_id + key.sign(text.encode())).decode()
    with open(f"{out}/checkpoint.txt", "w") as f:
        f.write(f"{text}\n\u2014 {ORIGIN} {sig}\n")
    print(f"{ORIGIN}+{key_id.hex()}+{base64.b64encode(public).decode()}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
