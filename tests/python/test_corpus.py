"""The break corpus (tests/corpus): every program compiled by kiln (backend "eager") must match
eager over two calls on fresh inputs: values, printed text, mutated arguments and global side
effects (tests/corpus/run.py's comparison). Break counts are not asserted here; run
`python -m tests.corpus.run` for kiln's graphs and breaks against torch.compile's."""
import os
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from tests.corpus.programs import PROGRAMS  # noqa: E402
from tests.corpus.run import check_kiln  # noqa: E402

# Programs kiln currently gets wrong, with the exact failure the comparison reports.
KNOWN_WRONG = {}  # none today; a program kiln gets wrong goes here with its exact failure (strict xfail)


def _case(prog):
    marks = []
    if prog.name in KNOWN_WRONG:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[prog.name]))
    return pytest.param(prog, id=f"{prog.group}-{prog.name}", marks=marks)


@pytest.mark.parametrize("prog", [_case(p) for p in PROGRAMS])
def test_corpus_program_matches_eager(prog):
    failure, _ = check_kiln(prog, backend="eager")
    assert failure is None, failure
