#!/usr/bin/env python3
"""vault: operations over the encrypted credential vault kept as files in the workspace.

Reads one JSON object on stdin (see SKILL.md), works in the current directory (the workspace),
prints one JSON object. Bad input: {"error": {"category": "invalid_argument", ...}}, exit 2;
a wrong passphrase: {"error": {"category": "permission", ...}}, exit 2; a damaged vault:
{"error": {"category": "integrity", ...}}, exit 2. Never a traceback. Standard library only.

Format (also in SKILL.md and the environment's docs.md):
  vault/header.json    {"format": "hvault-1", "kdf": "pbkdf2-hmac-sha256", "iterations": N,
                        "salt": HEX16, "check": HEX32}
  vault/entries/NAME.json  {"name": NAME, "nonce": HEX16, "ciphertext": HEX, "tag": HEX32}
  key material  = PBKDF2-HMAC-SHA256(passphrase, salt, iterations, dklen=64)
  enc_key = first 32 bytes, mac_key = last 32 bytes
  check   = HMAC-SHA256(mac_key, b"hvault-1 check")
  nonce   = HMAC-SHA256(mac_key, b"hvault-1 nonce\\0" + NAME + b"\\0" + SECRET)[:16]
  keystream block i = HMAC-SHA256(enc_key, nonce + i as 8-byte big-endian), i = 0, 1, ...
  ciphertext = SECRET (UTF-8) XOR keystream
  tag     = HMAC-SHA256(mac_key, b"hvault-1 tag\\0" + NAME + b"\\0" + nonce + ciphertext)
"""

import hashlib
import hmac
import json
import os
import re
import sys

MAX_INPUT_BYTES = 1 << 20
FORMAT = "hvault-1"
VAULT_DIR = "vault"
HEADER = os.path.join(VAULT_DIR, "header.json")
ENTRIES = os.path.join(VAULT_DIR, "entries")
DEFAULT_PASSPHRASE_FILE = "vault/passphrase"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
CLASSES = {
    "lower": "abcdefghijklmnopqrstuvwxyz",
    "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "digit": "0123456789",
    "symbol": "!#$%&*+-=?@^_",
}
CLASS_ORDER = ["lower", "upper", "digit", "symbol"]
OPS = {
    "list": {"op", "passphrase_file"},
    "get": {"op", "name", "passphrase_file"},
    "put": {"op", "name", "secret", "passphrase_file"},
    "generate": {"op", "name", "length", "classes", "seed", "passphrase_file"},
    "rekey": {"op", "new_passphrase_file", "passphrase_file"},
}


class Fail(Exception):
    def __init__(self, category, message):
        super().__init__(message)
        self.category = category
        self.message = message


def bad(message):
    return Fail("invalid_argument", message)


def answer(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def read_args():
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise bad("the arguments are larger than 1 MiB")
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise bad('the arguments are not a JSON object such as {"op": "list"}')
    if not isinstance(args, dict):
        raise bad('the arguments must be a JSON object such as {"op": "list"}')
    op = args.get("op")
    if op is None:
        raise bad("missing `op`: one of list, get, put, generate, rekey")
    if op not in OPS:
        raise bad("unknown `op` %r: one of list, get, put, generate, rekey" % (op,))
    unknown = sorted(set(args) - OPS[op])
    if unknown:
        raise bad("`%s` is not an argument of `%s` (it takes %s)"
                  % (unknown[0], op, ", ".join(sorted(OPS[op] - {"op"}))))
    return op, args


def need_str(args, key, what):
    v = args.get(key)
    if v is None:
        raise bad("missing `%s`: %s" % (key, what))
    if not isinstance(v, str) or not v:
        raise bad("`%s` must be a non-empty string" % key)
    return v


def need_name(args):
    name = need_str(args, "name", "the entry's name, such as \"billing-db\"")
    if not NAME_RE.match(name):
        raise bad("`name` %r is not a valid entry name (lowercase letters, digits, `.`, `_`, `-`; "
                  "starting with a letter or digit; at most 64 characters)" % name)
    return name


def safe_path(path, key):
    if not isinstance(path, str) or not path or "\0" in path:
        raise bad("`%s` must be a non-empty relative path" % key)
    if os.path.isabs(path):
        raise bad("`%s` must be relative to the workspace, not absolute" % key)
    if ".." in path.replace("\\", "/").split("/"):
        raise bad("`%s` must not contain `..`" % key)
    workspace = os.path.realpath(os.getcwd())
    real = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([workspace, real]) != workspace:
        raise bad("`%s` (%s) is outside the workspace" % (key, path))
    return real


def read_passphrase(path, key):
    real = safe_path(path, key)
    if not os.path.isfile(real):
        raise bad("no passphrase file `%s` in the workspace" % path)
    try:
        with open(real, "r", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        raise bad("cannot read the passphrase file `%s` as UTF-8 text" % path)
    lines = text.splitlines()
    phrase = lines[0] if lines else ""
    if not phrase:
        raise bad("the passphrase file `%s` is empty (its first line is the passphrase)" % path)
    return phrase


def derive(phrase, salt, iterations):
    km = hashlib.pbkdf2_hmac("sha256", phrase.encode("utf-8"), salt, iterations, dklen=64)
    return km[:32], km[32:]


def keystream_xor(enc_key, nonce, data):
    out = bytearray()
    i = 0
    while len(out) < len(data):
        out += hmac.new(enc_key, nonce + i.to_bytes(8, "big"), hashlib.sha256).digest()
        i += 1
    return bytes(a ^ b for a, b in zip(data, out))


def load_header():
    if not os.path.isfile(HEADER):
        raise Fail("not_found", "no vault here: `%s` is missing" % HEADER)
    try:
        with open(HEADER, "r", encoding="utf-8") as f:
            h = json.load(f)
        if h.get("format") != FORMAT or h.get("kdf") != "pbkdf2-hmac-sha256":
            raise ValueError
        iterations = int(h["iterations"])
        salt = bytes.fromhex(h["salt"])
        check = bytes.fromhex(h["check"])
        if iterations < 1 or iterations > 10_000_000:
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError):
        raise Fail("integrity", "`%s` is not a valid %s header" % (HEADER, FORMAT))
    return iterations, salt, check


def open_vault(passphrase_file):
    iterations, salt, check = load_header()
    phrase = read_passphrase(passphrase_file, "passphrase_file")
    enc_key, mac_key = derive(phrase, salt, iterations)
    if not hmac.compare_digest(hmac.new(mac_key, b"hvault-1 check", hashlib.sha256).digest(), check):
        raise Fail("permission", "wrong passphrase: `%s` does not open this vault" % passphrase_file)
    return {"iterations": iterations, "salt": salt, "enc": enc_key, "mac": mac_key}


def entry_names():
    if not os.path.isdir(ENTRIES):
        return []
    names = []
    for f in os.listdir(ENTRIES):
        if f.endswith(".json") and NAME_RE.match(f[:-5]):
            names.append(f[:-5])
    return sorted(names)


def encrypt(keys, name, secret):
    data = secret.encode("utf-8")
    nonce = hmac.new(keys["mac"], b"hvault-1 nonce\0" + name.encode() + b"\0" + data,
                     hashlib.sha256).digest()[:16]
    ct = keystream_xor(keys["enc"], nonce, data)
    tag = hmac.new(keys["mac"], b"hvault-1 tag\0" + name.encode() + b"\0" + nonce + ct,
                   hashlib.sha256).digest()
    return {"name": name, "nonce": nonce.hex(), "ciphertext": ct.hex(), "tag": tag.hex()}


def decrypt(keys, name):
    path = os.path.join(ENTRIES, name + ".json")
    if not os.path.isfile(path):
        raise Fail("not_found", "no entry `%s` in the vault" % name)
    try:
        with open(path, "r", encoding="utf-8") as f:
            e = json.load(f)
        nonce = bytes.fromhex(e["nonce"])
        ct = bytes.fromhex(e["ciphertext"])
        tag = bytes.fromhex(e["tag"])
        if e.get("name") != name:
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise Fail("integrity", "entry file `%s` is damaged" % path)
    want = hmac.new(keys["mac"], b"hvault-1 tag\0" + name.encode() + b"\0" + nonce + ct,
                    hashlib.sha256).digest()
    if not hmac.compare_digest(want, tag):
        raise Fail("integrity", "entry `%s` failed its integrity check (tag mismatch)" % name)
    try:
        return keystream_xor(keys["enc"], nonce, ct).decode("utf-8")
    except UnicodeDecodeError:
        raise Fail("integrity", "entry `%s` does not decrypt to UTF-8 text" % name)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def store(keys, name, secret):
    path = os.path.join(ENTRIES, name + ".json")
    created = not os.path.exists(path)
    write_json(path, encrypt(keys, name, secret))
    return created


def generate_password(seed, length, classes):
    alphabet = "".join(CLASSES[c] for c in classes)
    limit = 256 - 256 % len(alphabet)
    counter = 0
    buf = b""

    def next_byte():
        nonlocal counter, buf
        if not buf:
            buf = hmac.new(seed.encode("utf-8"), b"hvault-1 generate\0" + counter.to_bytes(8, "big"),
                           hashlib.sha256).digest()
            counter += 1
        b, buf = buf[0], buf[1:]
        return b

    while True:
        chars = []
        while len(chars) < length:
            b = next_byte()
            if b < limit:
                chars.append(alphabet[b % len(alphabet)])
        pw = "".join(chars)
        if all(any(ch in CLASSES[c] for ch in pw) for c in classes):
            return pw


def main():
    try:
        op, args = read_args()
        pf = args.get("passphrase_file", DEFAULT_PASSPHRASE_FILE)
        if op == "list":
            keys = open_vault(pf)
            names = entry_names()
            answer({"entries": names, "count": len(names)}, 0)
        if op == "get":
            name = need_name(args)
            keys = open_vault(pf)
            answer({"name": name, "secret": decrypt(keys, name)}, 0)
        if op == "put":
            name = need_name(args)
            secret = need_str(args, "secret", "the secret to store")
            if len(secret) > 4096:
                raise bad("`secret` is longer than 4096 characters")
            keys = open_vault(pf)
            answer({"name": name, "created": store(keys, name, secret)}, 0)
        if op == "generate":
            name = need_name(args)
            seed = need_str(args, "seed", "the seed the password is derived from")
            length = args.get("length")
            if length is None:
                raise bad("missing `length`: the password's length, 8 to 128")
            if isinstance(length, bool) or not isinstance(length, int) or not 8 <= length <= 128:
                raise bad("`length` must be an integer from 8 to 128")
            classes = args.get("classes")
            if classes is None:
                raise bad("missing `classes`: a list drawn from lower, upper, digit, symbol")
            if (not isinstance(classes, list) or not classes
                    or any(c not in CLASSES for c in classes) or len(set(classes)) != len(classes)):
                raise bad("`classes` must be a non-empty list of distinct values from "
                          "lower, upper, digit, symbol")
            if len(classes) > length:
                raise bad("`length` is shorter than the number of classes")
            ordered = [c for c in CLASS_ORDER if c in classes]
            keys = open_vault(pf)
            pw = generate_password(seed, length, ordered)
            created = store(keys, name, pw)
            answer({"name": name, "created": created, "length": length, "classes": ordered}, 0)
        if op == "rekey":
            newf = args.get("new_passphrase_file")
            if newf is None:
                raise bad("missing `new_passphrase_file`: the file holding the new passphrase")
            new_phrase = read_passphrase(newf, "new_passphrase_file")
            keys = open_vault(pf)
            secrets = [(n, decrypt(keys, n)) for n in entry_names()]
            salt = hashlib.sha256(b"hvault-1 salt\0" + keys["salt"] + new_phrase.encode("utf-8")).digest()[:16]
            enc_key, mac_key = derive(new_phrase, salt, keys["iterations"])
            new_keys = {"iterations": keys["iterations"], "salt": salt, "enc": enc_key, "mac": mac_key}
            for n, s in secrets:
                write_json(os.path.join(ENTRIES, n + ".json"), encrypt(new_keys, n, s))
            write_json(HEADER, {
                "format": FORMAT, "kdf": "pbkdf2-hmac-sha256", "iterations": keys["iterations"],
                "salt": salt.hex(),
                "check": hmac.new(mac_key, b"hvault-1 check", hashlib.sha256).hexdigest(),
            })
            answer({"rekeyed": len(secrets), "salt": salt.hex()}, 0)
    except Fail as e:
        answer({"error": {"category": e.category, "message": e.message}}, 2)
    except SystemExit:
        raise
    except Exception as e:  # never a traceback
        answer({"error": {"category": "internal", "message": "vault failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
