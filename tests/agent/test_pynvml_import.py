"""pynvml imported without ``ctypes.util`` (plugin start-up, issue 9): nothing loads shutil,
subprocess or tempfile for it, and ``find_library`` and ``ctypes.util`` still work as before."""

from __future__ import annotations

import json
import subprocess
import sys

DEFERRED = """
import json, sys
from falcon_gpu.pynvml_import import import_pynvml
import_pynvml()
import pynvml
loaded = sorted(set(sys.modules) & {"ctypes.util", "subprocess", "shutil", "tempfile"})
deferred = pynvml.find_library("c")  # loads the real module now
import ctypes.util
from ctypes.util import find_library
print(json.dumps({"loaded": loaded, "deferred": deferred, "real": find_library("c"),
                  "same": sys.modules["ctypes.util"] is ctypes.util,
                  "real_module": type(ctypes.util).__name__, "named": ctypes.util.find_library.__module__,
                  "other": callable(ctypes.util.test)}))
"""


def _run(code: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_pynvml_is_imported_without_ctypes_util_which_loads_on_first_use() -> None:
    got = _run(DEFERRED)
    assert got["loaded"] == []
    assert isinstance(got["real"], str) and got["real"].startswith("libc.so")
    assert got["deferred"] == got["real"]  # the stand-in's find_library is the real one's answer
    assert got["same"] is True and got["real_module"] == "module" and got["named"] == "ctypes.util"
    assert got["other"] is True


def test_with_ctypes_util_loaded_already_pynvml_is_imported_as_usual() -> None:
    got = _run(
        "import ctypes.util, json, sys\n"
        "from falcon_gpu.pynvml_import import import_pynvml\n"
        "import_pynvml()\n"
        "import pynvml\n"
        "print(json.dumps({'real': pynvml.find_library is ctypes.util.find_library,"
        " 'kept': sys.modules['ctypes.util'] is ctypes.util}))\n"
    )
    assert got == {"real": True, "kept": True}


def test_a_name_the_stand_in_does_not_define_comes_from_the_real_module() -> None:
    got = _run(
        "import json, sys\n"
        "from falcon_gpu import pynvml_import\n"
        "stand_in = pynvml_import._Deferred('ctypes.util')\n"
        "sys.modules['ctypes.util'] = stand_in\n"
        "got = stand_in.test\n"  # not defined on the stand-in: loads and answers the real one
        "import ctypes.util\n"
        "print(json.dumps({'real': got is ctypes.util.test,"
        " 'replaced': sys.modules['ctypes.util'] is not stand_in}))\n"
    )
    assert got == {"real": True, "replaced": True}
