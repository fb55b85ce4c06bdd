"""Break corpus (issue 9): small programs using the Python constructs real models and user code
use, and a runner (``python -m tests.corpus.run``) comparing kiln with torch.compile on them."""
