"""Modules imported without a stdlib module they bind but do not use (plugin start-up, issue 9):
pynvml without ``ctypes.util`` (shutil, subprocess, tempfile), logging without ``traceback``
(linecache, tokenize, textwrap), pathlib without ``urllib.parse`` (ipaddress); what they took from
it, and the module itself, still work as before."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.agent.probe import run_probe

ROOT = Path(__file__).resolve().parents[2]

PYNVML = """
import json, sys
from falcon_gpu.deferred_import import import_pynvml
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

PATHLIB = """
import json, sys
from falcon_gpu.deferred_import import import_pathlib
import_pathlib()
from pathlib import Path
loaded = sorted(set(sys.modules) & {"urllib.parse", "ipaddress"})
uri = Path("/a b/c%d").as_uri()  # loads the real module now
from urllib.parse import quote_from_bytes
print(json.dumps({"loaded": loaded, "uri": uri, "real": quote_from_bytes(b"/a b"),
                  "kind": type(sys.modules["urllib.parse"]).__name__}))
"""

LOGGING = """
import io, json, logging, sys
loaded = sorted(set(sys.modules) & {"traceback", "linecache", "tokenize", "textwrap"})
out = io.StringIO()
log = logging.getLogger("t")
log.addHandler(logging.StreamHandler(out))
try:
    1 / 0
except ZeroDivisionError:
    log.exception("boom")  # formats the traceback: loads the real module now
log.error("here", stack_info=True)
print(json.dumps({"loaded": loaded, "out": out.getvalue(),
                  "kind": type(sys.modules["traceback"]).__name__}))
"""


def _run(code: str, *flags: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return run_probe(code, flags=flags, env=env)


def test_pynvml_is_imported_without_ctypes_util_which_loads_on_first_use() -> None:
    got = _run(PYNVML)
    assert got["loaded"] == []
    assert isinstance(got["real"], str) and got["real"].startswith("libc.so")
    assert got["deferred"] == got["real"]  # the stand-in's find_library answers the real one's answer
    assert got["same"] is True and got["real_module"] == "module" and got["named"] == "ctypes.util"
    assert got["other"] is True


def test_pathlib_is_imported_without_urllib_parse_and_as_uri_still_quotes() -> None:
    # -S: no site, whose editable-install finder imports pathlib before anything else runs
    got = _run(PATHLIB, "-S")
    assert got == {"loaded": [], "uri": "file:///a%20b/c%25d", "real": "/a%20b", "kind": "module"}


def test_logging_is_imported_without_traceback_and_still_prints_exceptions_and_stacks() -> None:
    got = _run("from falcon_gpu.deferred_import import import_logging\nimport_logging()\n" + LOGGING, "-S")
    assert got["loaded"] == [] and got["kind"] == "module"
    out = got["out"]
    assert isinstance(out, str)
    assert re.fullmatch(
        r'boom\nTraceback \(most recent call last\):\n  File "<string>", line \d+, in <module>\n'
        r"ZeroDivisionError: division by zero\n"
        r'here\nStack \(most recent call last\):\n  File "<string>", line \d+, in <module>\n',
        out,
    )
    plain = _run(LOGGING, "-S")  # the same as logging imported as usual (which loads them all)
    assert plain["loaded"] == ["linecache", "textwrap", "tokenize", "traceback"]
    assert isinstance(plain["out"], str)
    assert re.sub(r"line \d+", "", plain["out"]) == re.sub(r"line \d+", "", out)


def test_with_the_module_loaded_already_the_import_is_a_plain_one() -> None:
    got = _run(
        "import ctypes.util, json, sys\n"
        "from falcon_gpu.deferred_import import import_pynvml\n"
        "import_pynvml()\n"
        "import pynvml\n"
        "print(json.dumps({'real': pynvml.find_library is ctypes.util.find_library,"
        " 'kept': sys.modules['ctypes.util'] is ctypes.util}))\n"
    )
    assert got == {"real": True, "kept": True}


def test_a_name_the_stand_in_does_not_define_comes_from_the_real_module() -> None:
    got = _run(
        "import json, sys\n"
        "from falcon_gpu import deferred_import\n"
        "stand_in = deferred_import._Deferred('ctypes.util')\n"
        "sys.modules['ctypes.util'] = stand_in\n"
        "got = stand_in.test\n"  # not defined on the stand-in: loads and answers the real one
        "import ctypes.util\n"
        "print(json.dumps({'real': got is ctypes.util.test,"
        " 'replaced': sys.modules['ctypes.util'] is not stand_in}))\n"
    )
    assert got == {"real": True, "replaced": True}
