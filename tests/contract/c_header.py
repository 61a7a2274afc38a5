"""Compile a generated C header with a main() of checks (each `if (...) return k;`) and run it."""

import shutil
import subprocess


def compile_and_run(tmp_path, header: str, text: str, checks: list) -> int:
    """The exit status of a C99 program (gcc -Wall -Wextra -Werror) that includes ``header`` (``text``) and
    runs ``checks`` (0: every check held)."""
    gcc = shutil.which("gcc")
    assert gcc, "gcc is needed (Debian: build-essential)"
    (tmp_path / header).write_text(text)
    src = tmp_path / "t.c"
    src.write_text(f'#include "{header}"\nint main(void) {{\n' + "\n".join(checks) + "\nreturn 0;\n}\n")
    exe = tmp_path / "t"
    subprocess.run([gcc, "-Wall", "-Wextra", "-Werror", "-std=c99", "-I", str(tmp_path), str(src), "-o", str(exe)],
                   check=True)
    return subprocess.run([str(exe)]).returncode
