"""Run the real ``copyprobe`` CLI in a subprocess with the model replaced by a FakeBackend.

    python tests/reliability/fake_cli.py detect --model fake --data F --out DIR --cache C ...

Only the loader is swapped (``copyprobe.backends.specs.load_backend``): argument
parsing, the runner, the SQLite cache, the run record and signal handling are the real
ones. The fake model:

* answers like :class:`copyprobe.backends.fake.FakeBackend` (passages labelled 1 in the
  ``--data`` JSONL file are its "members");
* waits ``$FAKE_DELAY`` seconds per request (a slow model, so a kill lands mid-work);
* appends one line ``<pid> <fingerprint> <kind> <request key>`` to ``$FAKE_LOG`` for every request it
  answers -- the model's own log, to count what was computed more than once.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    from copyprobe.backends import specs
    from copyprobe.backends.fake import FakeBackend

    argv = sys.argv[1:]
    log_path = os.environ.get("FAKE_LOG")
    delay = float(os.environ.get("FAKE_DELAY", "0"))
    members: list[str] = []
    if "--data" in argv:
        data = argv[argv.index("--data") + 1]
        if data.endswith(".jsonl") and os.path.isfile(data):
            with open(data, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict) and row.get("label") == 1 and isinstance(row.get("text"), str):
                        members.append(row["text"])

    class LoggingFake(FakeBackend):
        def answer(self, requests, progress=None, on_result=None):
            out = []
            fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if log_path else None
            try:
                for request in requests:
                    if delay:
                        time.sleep(delay)
                    (response,) = super().answer([request])
                    out.append(response)
                    if fd is not None:
                        os.write(fd, f"{os.getpid()} {self.fingerprint} {request.kind} {request.key()}\n".encode())
                    if on_result is not None:  # streamed into the cache as it finishes
                        on_result(len(out) - 1, response)
                    if progress:
                        progress(1)
            finally:
                if fd is not None:
                    os.close(fd)
            return out

    real_loader = specs.load_backend

    def load_backend(spec, **kwargs):
        if spec.startswith("fake"):
            return LoggingFake(spec=spec, member_texts=members)
        return real_loader(spec, **kwargs)

    specs.load_backend = load_backend
    from copyprobe.cli.main import entry

    entry(argv)  # the program's own entry point, Ctrl-C handling included


if __name__ == "__main__":
    main()
