"""``python -m copyprobe``: the `copyprobe` program, for an environment whose scripts folder
is not on PATH."""

from copyprobe.cli.main import entry

if __name__ == "__main__":
    entry()
