"""Whose compile cache entries a process runs (csrc/runtime/CacheTrust.h), end to end in fresh processes.

An entry is a serialized executable the process loads and runs: one planted by another user must never
execute. These tests forge one (another program's executable under this program's key, with a valid
SHA-256 checksum, as anyone able to write the folder could) and show that it runs where the folder is
trusted by opt-in, and never runs where the rules refuse it. Like tests/test_compile_cache.py they do not
take the `mode` fixture: the cache sits below the eager modes, and Strict's one program per op is what
makes a single forged entry meaningful.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = 88  # magic[8] version u32 infoLen u32 payloadLen u64 key[32] seal[32]

# One program per child besides arange: OP=neg computes x.neg(), OP=exp x.exp() (the same signature, so one
# program's executable runs in the other's place).
CHILD = r"""
import json, os, torch
x = torch.arange(4, dtype=torch.float32, device="tpu")
y = x.neg() if os.environ["OP"] == "neg" else x.exp()
print("RESULT " + json.dumps({"y": y.cpu().tolist(), "disk": torch.tpu.compile_cache_stats()["disk"]}), flush=True)
"""
X = torch.arange(4, dtype=torch.float32)
EXPECTED = {"neg": X.neg().tolist(), "exp": X.exp().tolist()}


def run(folder, op, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_CACHE")}
    e.update(TORCH_TPU_CACHE_DIR=str(folder), OP=op, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1",
             TORCH_TPU_EAGER_MODE="strict", **env)
    p = subprocess.run([sys.executable, "-c", CHILD], env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads([l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])
    out["stderr"] = p.stderr
    return out


def program_entries(tmp_path):
    """{op: (file name, entry bytes)} of each op's own program (not arange's), one child per op."""
    folders = {}
    for op in ("neg", "exp"):
        folders[op] = tmp_path / f"only-{op}"
        folders[op].mkdir(mode=0o700)
        run(folders[op], op)
    names = {op: set(os.listdir(f)) for op, f in folders.items()}
    out = {}
    for op, other in (("neg", "exp"), ("exp", "neg")):
        (name,) = names[op] - names[other]
        out[op] = (name, (folders[op] / name).read_bytes())
    return out


def forge(folder, name, donor):
    """An entry for the key `name` holding the donor entry's info and executable (another program), with a
    valid SHA-256 checksum."""
    info_len = struct.unpack("<I", donor[12:16])[0]
    body = donor[HEADER:]
    key = bytes.fromhex(name[:64])
    header = b"TPUXCACH" + struct.pack("<IIQ", 1, info_len, len(body) - info_len) + key
    (folder / name).write_bytes(header + hashlib.sha256(body).digest() + body)
    os.chmod(folder / name, 0o644)


def test_forged_entry_runs_only_where_the_folder_is_trusted_by_opt_in(tmp_path):
    entries = program_entries(tmp_path)
    exp_name, neg_entry = entries["exp"][0], entries["neg"][1]
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone may write here
    forge(shared, exp_name, neg_entry)

    # Opted in (TORCH_TPU_CACHE_TRUST_SHARED=1, no key): the forgery is loaded and runs: x.exp() returns -x.
    # This is what the rules below prevent.
    opted_in = run(shared, "exp", TORCH_TPU_CACHE_TRUST_SHARED="1")
    assert opted_in["y"] == EXPECTED["neg"] != EXPECTED["exp"]

    # Default rules: a folder others can write is not used at all (one warning), the result is right.
    out = run(shared, "exp")
    assert out["y"] == EXPECTED["exp"]
    assert out["stderr"].count("not using the compile cache folder") == 1, out["stderr"]
    assert "writable by other users (mode 0777)" in out["stderr"]
    assert out["disk"]["hits"] == 0 and out["disk"]["writes"] == 0

    # A team key: the folder is used, the unsealed forgery is refused and replaced by a sealed entry.
    key_file = tmp_path / "team.key"
    key_file.write_text("correct horse battery staple\n")
    keyed = run(shared, "exp", TORCH_TPU_CACHE_KEY_FILE=str(key_file))
    assert keyed["y"] == EXPECTED["exp"]
    # Both unsealed entries are refused: the forgery and arange's, written unsealed by the opted-in run.
    assert keyed["disk"]["untrusted_entries"] == 2 and keyed["disk"]["hits"] == 0, keyed["stderr"]
    assert "seal mismatch" in keyed["stderr"]
    again = run(shared, "exp", TORCH_TPU_CACHE_KEY_FILE=str(key_file))
    assert again["y"] == EXPECTED["exp"] and again["disk"]["hits"] == 2 and again["disk"]["untrusted_entries"] == 0
    # Another key (or none, opted in) does not accept the team's sealed entries either.
    other_key = tmp_path / "other.key"
    other_key.write_text("another key")
    other = run(shared, "exp", TORCH_TPU_CACHE_KEY_FILE=str(other_key))
    assert other["y"] == EXPECTED["exp"] and other["disk"]["hits"] == 0 and other["disk"]["untrusted_entries"] == 2


def test_entry_others_can_write_is_never_loaded(tmp_path):
    entries = program_entries(tmp_path)
    exp_name, neg_entry = entries["exp"][0], entries["neg"][1]
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    forge(own, exp_name, neg_entry)
    os.chmod(own / exp_name, 0o666)  # the folder is private, but the entry file is writable by anyone
    out = run(own, "exp")
    assert out["y"] == EXPECTED["exp"]
    assert out["disk"]["untrusted_entries"] == 1 and "never loaded" in out["stderr"], out["stderr"]
    if os.geteuid() == 0:  # only root can give a file to another user
        forge(own, exp_name, neg_entry)
        os.chown(own / exp_name, 12345, 12345)
        out = run(own, "exp")
        assert out["y"] == EXPECTED["exp"]
        assert "owned by uid 12345" in out["stderr"], out["stderr"]


def test_unreadable_key_file_keeps_the_cache_off(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    out = run(folder, "neg", TORCH_TPU_CACHE_KEY_FILE=str(tmp_path / "missing.key"))
    assert out["y"] == EXPECTED["neg"]
    assert "cannot read a key from TORCH_TPU_CACHE_KEY_FILE" in out["stderr"], out["stderr"]
    assert os.listdir(folder) == []  # never falls back to unsigned entries
