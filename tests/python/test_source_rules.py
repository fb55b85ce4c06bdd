"""Rules of the C++ sources that no compiler checks: kiln._C must not include <iostream> or <sstream>
(their static initialisation crashed kiln._C at load on the GPU machines' image), and reads none
of kiln's environment variables (kiln/_options.py owns every knob and pushes values to C++)."""
import pathlib
import re

CSRC = pathlib.Path(__file__).resolve().parents[2] / "csrc"


def test_no_iostream_or_sstream_in_kiln_sources():
    banned = re.compile(r"^\s*#\s*include\s*<(iostream|sstream)>", re.M)
    offenders = [str(p.relative_to(CSRC)) for p in sorted(CSRC.rglob("*")) if p.suffix in (".h", ".cpp", ".c", ".cu")
                 and banned.search(p.read_text(errors="replace"))]
    assert CSRC.is_dir() and not offenders, offenders


def test_the_cpp_core_reads_no_kiln_environment_variable():
    reads = re.compile(r"getenv\(\s*\"KILN_")
    offenders = [str(p.relative_to(CSRC)) for p in sorted(CSRC.rglob("*")) if p.suffix in (".h", ".cpp", ".c", ".cu")
                 and reads.search(p.read_text(errors="replace"))]
    assert not offenders, offenders
