"""`copyprobe` command line. Thin: parses, calls the public API, prints.

Each subcommand lives in ``copyprobe/cli/commands/<name>.py`` and is found
automatically, so a new command is one new file: ``HELP`` (one line), ``DESCRIPTION``
(optional), ``add_arguments(parser)`` and ``run(args) -> exit code``. A command with
sub-actions may instead define ``register(subparsers)`` and build its parser itself.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import pkgutil
import signal
import sys
import threading
import warnings

from copyprobe.errors import CopyprobeError, DataWarning, Interrupted, SettingError, one_line


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (the rule for every bad input), pointing to --help."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from copyprobe._version import __version__
    import copyprobe.cli.commands as commands

    parser = OneLineParser(
        prog="copyprobe",
        description="Was a language model trained on this text, and how much of it does it reproduce?",
    )
    parser.add_argument("--version", action="version", version=f"copyprobe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"copyprobe.cli.commands.{info.name}")
        if hasattr(module, "register"):  # a command that builds its own parser (e.g. sub-actions)
            module.register(sub)
            continue
        parser_ = sub.add_parser(info.name.replace("_", "-"), help=module.HELP,
                                 description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(parser_)
        parser_.set_defaults(func=module.run)
    _name_commands(parser)
    return parser


def _given_to(prog: str, argv: list[str], first_extra: str) -> str:
    """The command an unrecognized argument was given to: ``prog`` ('copyprobe canary make')
    cut to the command words that come before it in ``argv`` (copyprobe --bogus methods:
    copyprobe)."""
    words, names, at = prog.split(), [], 0
    extra_at = argv.index(first_extra) if first_extra in argv else len(argv)
    for word in words[1:]:
        at = argv.index(word, at) if word in argv[at:] else len(argv)
        if at > extra_at:
            break
        names.append(word)
    return " ".join(words[:1] + names)


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Each command's parser, sub-actions' too (canary make, freq build), records its own
    name as ``_prog``, unless it set one: its errors name the command and its --help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                if not command.get_default("_prog"):
                    # a setting's error names the option that set it (add_settings may set it too)
                    command.set_defaults(_prog=command.prog)
                _name_commands(command)


def main(argv: list[str] | None = None) -> int:
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        """copyprobe's own warnings (DataWarning) as one line; others as Python shows them."""
        if issubclass(category, DataWarning):
            print(f"copyprobe: warning: {message}", file=file or sys.stderr)
        else:
            previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    _printable_names()
    try:
        return _main(argv)
    finally:
        warnings.showwarning = previous


def _printable_names() -> None:
    """A file name with bytes that are not UTF-8 (read by Python as lone surrogates) is
    printed with an escape where the locale's stream would refuse it (en_US.UTF-8 does; under
    C.UTF-8 Python writes the raw byte back): said after the run was written, the refusal
    was its error line."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already closed or detached
                pass


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)  # a usage error: argparse prints it and exits 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if extra:  # said by the command they were given to, whose --help lists what it takes
        prog = _given_to(getattr(args, "_prog", None) or parser.prog, list(sys.argv[1:] if argv is None else argv),
                         extra[0])
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see {prog} --help)", file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _interrupts.hint = resume_hint(args)
    try:
        code = args.func(args)
    except SettingError as exc:
        flag = (getattr(args, "_setting_flags", None) or {}).get(exc.setting)
        if flag is None and hasattr(args, exc.setting) and getattr(args, "_prog", None):
            flag = "--" + exc.setting.replace("_", "-")  # an option of this command by the setting's name
        if flag is None:  # a setting the command line did not read: the library's words
            print(f"copyprobe: error: {' '.join(str(exc).split())}", file=sys.stderr)
        else:  # the option that set it, as argparse words a bad option value
            print(f"{args._prog}: error: argument {flag}: {exc.problem} (see {args._prog} --help)", file=sys.stderr)
        return exc.exit_code
    except CopyprobeError as exc:
        message = str(exc).strip().replace("\r", "\\r").replace("\n", "\\n")  # one line, always
        print(f"copyprobe: error: {message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        # a command that kept its work elsewhere says where (errors.Interrupted)
        told = str(exc) if isinstance(exc, Interrupted) else ""
        told = told or f"interrupted; {_interrupts.hint}"
        if _interrupts.by == signal.SIGTERM:  # a scheduler's or `kill`'s stop: said as such
            told = "terminated (SIGTERM)" + (told[len("interrupted"):] if told.startswith("interrupted")
                                             else "; " + told)
        print(f"copyprobe: {told}", file=sys.stderr)
        _interrupts.told = True
        return 143 if _interrupts.by == signal.SIGTERM else 130
    except MemoryError:
        # name only what this command can lower (rescore has no --batch-size)
        flags = [f for f, dest in (("--batch-size", "batch_size"), ("--bootstrap", "n_bootstrap"),
                                    ("--bootstrap", "bootstrap"), ("--limit", "limit")) if hasattr(args, dest)]
        hint = f"; try a smaller {' or '.join(dict.fromkeys(flags))}" if flags else ""
        print(f"copyprobe: error: out of memory{hint}", file=sys.stderr)
        return 2
    except OSError as exc:  # the environment: full disk, read-only, a directory, permissions
        print(f"copyprobe: error: {describe_os_error(exc, resumable=_keeps_work(args))}", file=sys.stderr)
        return 2
    except RecursionError:
        print("copyprobe: error: an input is nested too deeply to read (e.g. JSON with thousands of "
              "nested brackets)", file=sys.stderr)
        return 2
    except UnicodeError as exc:
        print(f"copyprobe: error: {describe_unicode_error(exc)}", file=sys.stderr)
        return 2
    return int(code or 0)


_CACHE_KEPT = "finished work is in the cache — run the same command again to resume"


def _keeps_work(args: argparse.Namespace) -> bool:
    """Whether the command keeps the model's answers in the response cache as it goes (a
    command without the cache option does no model work, or keeps it its own way)."""
    return hasattr(args, "no_cache") and not args.no_cache


def resume_hint(args: argparse.Namespace) -> str:
    """What a stopped command has kept, said after 'interrupted; '."""
    if _keeps_work(args):
        return _CACHE_KEPT
    if hasattr(args, "no_cache"):
        return "nothing the model computed was kept (the cache was off); run it again without --no-cache to make it resumable"
    return "run the same command again"


_RESUME = "finished model work is in the cache: run the same command again to resume"
_OS_HINTS = {
    errno.ENOSPC: ("no space left on device", "free some space"),
    errno.EDQUOT: ("disk quota exceeded", "free some space"),
    errno.EROFS: ("read-only file system", "choose a writable location"),
    errno.EISDIR: ("is a directory", "give a file path"),
    errno.ENOTDIR: ("a part of the path is a file, not a directory", "check the path"),
    errno.EACCES: ("permission denied", "choose a location you can write to"),
    errno.EPERM: ("operation not permitted", "choose a location you can write to"),
    errno.EEXIST: ("already exists", "remove it or choose another path"),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n)"),
}


def describe_os_error(exc: OSError, resumable: bool = True) -> str:
    """One line for an OSError that reached the command boundary: what, which file, what to
    do (``resumable``: the command keeps the model's answers in the cache as it goes)."""
    what, hint = _OS_HINTS.get(exc.errno, (exc.strerror or type(exc).__name__, ""))
    if resumable and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint += f"; {_RESUME}"
    where = exc.filename if exc.filename is not None else None
    text = f"{where}: {what}" if where else what
    if exc.filename2 is not None:
        text += f" (and {exc.filename2})"
    if exc.errno not in _OS_HINTS and exc.strerror is None:
        text = one_line(exc)
    return f"{text}; {hint}" if hint else text


def describe_unicode_error(exc: UnicodeError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return (f"a file is not valid {exc.encoding}: byte 0x{exc.object[exc.start]:02x} at offset "
                f"{exc.start}; re-save it as UTF-8")
    return f"cannot encode or decode text ({one_line(exc)})"


class _Interrupts:
    """SIGINT and SIGTERM for the `copyprobe` program. The first raises KeyboardInterrupt
    as Ctrl-C does, so the run ends cleanly with its resume hint (waiting, e.g., for the
    API requests in flight; a batch scheduler sends SIGTERM some seconds before SIGKILL);
    a second one stops at once: exit 130 (143 for SIGTERM), one line in all, never a
    traceback from the cleanup it cut short."""

    def __init__(self) -> None:
        self.count = 0
        self.by: int | None = None  # the first signal
        self.told = False  # the resume hint is printed: the second signal adds no line
        self.hint = _CACHE_KEPT  # set per command (resume_hint)

    def __call__(self, signum, frame) -> None:
        self.count += 1
        if self.count == 1:
            self.by = signum
            raise KeyboardInterrupt
        if not self.told:
            os.write(2, f"copyprobe: interrupted twice; stopped at once — {self.hint}\n".encode())
        os._exit(143 if self.by == signal.SIGTERM else 130)  # skips the cleanup not waited for; files are atomic


_interrupts = _Interrupts()


def entry(argv: list[str] | None = None) -> None:
    """The `copyprobe` program: :func:`main` with the Ctrl-C handling of a program (not
    installed by ``main`` itself, which tests and embedding code call in-process)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # an ignored SIGINT stays ignored
        signal.signal(signal.SIGINT, _interrupts)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupts)
    code = main(argv)
    if code in (130, 143):
        # interrupted, the line said: a second signal during the exit (Python resets its
        # handlers while it finalizes) must not turn the exit code into death by signal
        for signum in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(signum) is _interrupts:
                signal.signal(signum, signal.SIG_IGN)
    if _daemons_alive():
        _exit_now(code)
    sys.exit(code)


def _daemons_alive() -> bool:
    """Whether a daemon thread is still running while only the main thread must finish, as
    after a Ctrl-C or an error while the blind baseline is still fitting in the background."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    return bool(others) and all(t.daemon for t in others)


def _exit_now(code: int) -> None:
    """Exit without finalizing the interpreter. Python (up to 3.13) ends a daemon thread that
    wakes during finalization with pthread_exit; inside C++ code (scikit-learn, scipy) that
    aborts the process ("terminate called without an active exception", exit -6, not the
    code the user was told). Everything a run keeps is written atomically before this point,
    so only the exit handlers and the flush of the standard streams are kept."""
    import atexit

    blind = sys.modules.get("copyprobe.evaluation.blind")
    if blind is not None:  # no finalization follows os._exit: nothing to wait for the baseline's fits for
        atexit.unregister(blind.finish_prefetches)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream has nothing left to give
            pass
    os._exit(code)


if __name__ == "__main__":
    entry()
