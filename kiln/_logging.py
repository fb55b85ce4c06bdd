"""Log output for the KILN_LOGS channels; the C++ core calls `emit` for enabled channels."""
import sys


def emit(channel: str, message: str) -> None:
    for i, line in enumerate(message.rstrip("\n").split("\n")):
        sys.stderr.write(f"[kiln:{channel}] {line}\n" if i == 0 else f"[kiln:{channel}]   {line}\n")
