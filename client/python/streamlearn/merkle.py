"""Checks of an audit chain's RFC 6962 Merkle tree, independent of the server (docs/AUDIT.md,
"Merkle tree, signed tree heads and proofs").

The leaves are the chain's canonical lines (what Client.audit_read yields as ``line``). A tree
head is a signed note the server signs with its audit key; keep the ones you fetch, then:

    head = merkle.open_tree_head(note, public_key_pem)        # checks the Ed25519 signature
    proof = client.audit_inclusion_proof("clicks", index=7, tree_size=head.size)
    merkle.verify_inclusion(proof.line, 7, head, proof.hashes)          # or ProofError
    later = merkle.open_tree_head(client.audit_tree_head("clicks").note, public_key_pem)
    c = client.audit_consistency_proof("clicks", head.size, later.size)
    merkle.verify_consistency(head, later, c.hashes)                    # or ProofError

Client.audit_prove and Client.audit_check_consistency do both steps. Signatures need the
``cryptography`` package (Debian's python3-cryptography); the hash checks need nothing.
"""

import base64
import dataclasses
import hashlib
from typing import Iterable, List, Sequence, Union

__all__ = ["ProofError", "TreeHead", "leaf_hash", "node_hash", "root_of",
           "verify_inclusion", "verify_consistency", "open_tree_head", "KEY_NAME"]

KEY_NAME = "streamlearn-audit"
_DASH = "\u2014 "


class ProofError(ValueError):
    """A proof, a tree head or its signature does not check out; the message says which."""


@dataclasses.dataclass(frozen=True)
class TreeHead:
    origin: str   # "streamlearn.audit/<model>/<shard>"
    size: int     # records covered
    root: bytes   # 32-byte Merkle tree hash


def _bytes(data: Union[str, bytes]) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def leaf_hash(line: Union[str, bytes]) -> bytes:
    """SHA-256(0x00 || line)."""
    return hashlib.sha256(b"\x00" + _bytes(line)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_of(lines: Sequence[Union[str, bytes]]) -> bytes:
    """MTH of the lines (RFC 6962 2.1), e.g. of a chain read with Client.audit_read."""
    if not lines:
        return hashlib.sha256(b"").digest()
    level = [leaf_hash(x) for x in lines]
    # Pairing left to right level by level and carrying an odd last node up gives RFC 6962's
    # tree (its left subtrees are the largest powers of two).
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _hashes(proof: Iterable[Union[str, bytes]]) -> List[bytes]:
    out = []
    for h in proof:
        b = bytes.fromhex(h) if isinstance(h, str) else bytes(h)
        if len(b) != 32:
            raise ProofError("a proof hash is not 32 bytes")
        out.append(b)
    return out


def verify_inclusion(line: Union[str, bytes], index: int, head: TreeHead,
                     proof: Iterable[Union[str, bytes]]) -> None:
    """Raises ProofError unless `proof` (hex strings or bytes) shows that `line` is record
    `index` of the tree `head` commits to (RFC 9162 2.1.3.2)."""
    path = _hashes(proof)
    if not 0 <= index < head.size:
        raise ProofError(f"index {index} is not in a tree of {head.size} records")
    fn, sn, r = index, head.size - 1, leaf_hash(line)
    for p in path:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0 or r != head.root:
        raise ProofError(f"record {index} is not proven to be in the tree of {head.size} "
                         f"records of {head.origin}")


def verify_consistency(old: TreeHead, new: TreeHead,
                       proof: Iterable[Union[str, bytes]]) -> None:
    """Raises ProofError unless `proof` shows that the tree of `new` extends the tree of
    `old` (RFC 9162 2.1.4.2): same chain, nothing rewritten or dropped."""
    path = _hashes(proof)
    failed = ProofError(f"the tree of {new.size} records is not proven to extend the tree "
                        f"of {old.size} records of {new.origin}")
    if old.origin != new.origin:
        raise ProofError(f"the heads are of different chains: {old.origin} and {new.origin}")
    if old.size > new.size:
        raise ProofError(f"the old head covers {old.size} records and the new {new.size}")
    if old.size == new.size:
        if path or old.root != new.root:
            raise failed
        return
    if old.size == 0:
        if path or old.root != hashlib.sha256(b"").digest():
            raise failed
        return
    if not path:
        raise failed
    if old.size & (old.size - 1) == 0:
        path = [old.root] + path
    fn, sn = old.size - 1, new.size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise failed
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if fr != old.root or sr != new.root or sn != 0:
        raise failed


def open_tree_head(note: Union[str, bytes], public_key_pem: Union[str, bytes]) -> TreeHead:
    """Parses a signed tree head (Client.audit_tree_head(...).note) and checks its Ed25519
    signature under the audit key (Client.audit_head(...).public_key_pem, or the data
    directory's audit.pub). ProofError if it is malformed or not signed by that key."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    text = note.decode("utf-8") if isinstance(note, bytes) else note
    key = serialization.load_pem_public_key(_bytes(public_key_pem))
    if not isinstance(key, Ed25519PublicKey):
        raise ProofError("the public key is not an Ed25519 key")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key_id = hashlib.sha256(KEY_NAME.encode() + b"\n\x01" + raw).digest()[:4]
    body, sep, sigs = text.partition("\n\n")
    if not sep:
        raise ProofError("malformed tree head: no blank line before the signatures")
    lines = body.split("\n")
    if len(lines) != 3:
        raise ProofError("malformed tree head: the body is not origin, size and root")
    origin, size_text, root_text = lines
    if not size_text.isdigit() or (len(size_text) > 1 and size_text[0] == "0"):
        raise ProofError("malformed tree head: the size is not a decimal integer")
    try:
        root = base64.b64decode(root_text, validate=True)
    except ValueError as e:
        raise ProofError("malformed tree head: the root is not base64") from e
    if len(root) != 32:
        raise ProofError("malformed tree head: the root is not 32 bytes")
    signed = False
    for line in sigs.split("\n")[:-1] if sigs.endswith("\n") else [None]:
        if line is None or not line.startswith(_DASH):
            raise ProofError("malformed tree head: a bad signature line")
        name, _, b64 = line[len(_DASH):].partition(" ")
        try:
            blob = base64.b64decode(b64, validate=True)
        except ValueError as e:
            raise ProofError("malformed tree head: a signature is not base64") from e
        if name != KEY_NAME or blob[:4] != key_id:
            continue
        try:
            key.verify(blob[4:], (body + "\n").encode("utf-8"))
        except InvalidSignature as e:
            raise ProofError("the tree head's signature does not verify under the audit key"
                             ) from e
        signed = True
    if not signed:
        raise ProofError("the tree head carries no signature by the audit key")
    return TreeHead(origin=origin, size=int(size_text), root=root)
