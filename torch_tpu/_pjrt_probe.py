"""Reads a PJRT plugin's C API version without starting it: `python -I _pjrt_probe.py PLUGIN.so`.

The doctor runs this file in a child process for every candidate plugin, so a plugin that crashes
or hangs at `dlopen` takes down only the child (the doctor reports the signal). It uses the standard
library only (`-I` keeps torch_tpu's own folder off sys.path) and calls nothing but `GetPjrtApi`,
which returns a pointer to a static table; `PJRT_Plugin_Initialize` and clients are never touched.
Prints one JSON object: {"pjrt_api_version": "0.81", "struct_size": N} or {"error": "..."}.
"""
import ctypes
import json
import os
import sys


class _ApiVersion(ctypes.Structure):
    # pjrt_c_api.h: struct PJRT_Api_Version {size_t struct_size; PJRT_Extension_Base* extension_start;
    #                                          int major_version; int minor_version;}
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class _ApiHead(ctypes.Structure):
    # The first fields of struct PJRT_Api: struct_size, extension_start, then pjrt_api_version.
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("pjrt_api_version", _ApiVersion)]


def probe(path: str) -> dict:
    try:
        # RTLD_LOCAL, as the runtime loads it (csrc/pjrt/Plugin.cpp).
        lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        return {"error": f"dlopen failed: {exc}"}
    try:
        get_api = lib.GetPjrtApi
    except AttributeError:
        return {"error": "library has no GetPjrtApi symbol"}
    get_api.restype = ctypes.c_void_p
    get_api.argtypes = []
    address = get_api()
    if not address:
        return {"error": "GetPjrtApi returned null"}
    head = _ApiHead.from_address(address)
    version = head.pjrt_api_version
    return {"pjrt_api_version": f"{version.major_version}.{version.minor_version}",
            "struct_size": int(head.struct_size)}


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1])), flush=True)
    # Plugins start threads from static constructors; leave without running their destructors.
    os._exit(0)
