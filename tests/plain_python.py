"""Real processes for the tests, forked rather than started: `python SCRIPT ARGS` (run_plain),
`python -m MODULE ARGS` (run_module), `gradtrace ARGS` (run_gradtrace; start_gradtrace for one
the test pipes into or signals, as subprocess.Popen; forwarding_command for the processes a
test starts). Each is a child forked from a server that imported torch and torch._dynamo once
(and gradtrace, for gradtrace's runs): 2-3 s saved per run.

So run_plain's baseline is `python` with torch imported first, not a fresh `python`. What the
script is given is python's (tests/test_plain_python.py compares it with a real `python`): its
__main__ globals, sys.argv, sys.path[0], cwd, environment, standard streams, exit code or signal,
traceback, atexit and non-daemon threads at exit. What the preload changes: sys.modules holds
torch, torch._dynamo and what they import (`import torch` costs nothing), the warnings filters
are those torch's import left, torch read the variables it reads as it is imported in the
server's start environment, and the process's memory (RSS, VmPeak, ru_maxrss) counts the
server's. So a test of peak memory, import time or what a run imports starts a real
`subprocess.run([sys.executable, ...])` (as test_as_python_memory and test_stopped do).

A server is started per interpreter, kind ("python": torch imported; "gradtrace": gradtrace too)
and start environment (the variables in _READ_AT_START); it is killed as the tests' process
exits and leaves by itself if that process dies. This file run as a script is the server: it
takes one request at a time on a socket, with the child's standard streams as descriptors, and
answers with the child's pid; the child's exit code is written to a pipe that came with the
request."""

from __future__ import annotations

import atexit
import builtins
import contextlib
import functools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

# by interpreter, kind ("python" or "gradtrace": what each imported) and start environment
_servers: dict[tuple[str, str, tuple[str | None, ...]], tuple[subprocess.Popen[bytes], str]] = {}
_lock = threading.Lock()
_READ_AT_IMPORT = "GRADTRACE_WITHOUT"  # gradtrace's probes read it as they are imported
# What python reads as it starts (the locale sets stdout's encoding): a server is started
# in an environment that differs in these, not forked from one that started in another.
_READ_AT_START = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8",
                  "PYTHONPATH", "PYTHONHOME", "PATH")


def run_plain(script: str | Path, *args: str, cwd: str | Path | None = None,
              env: dict[str, str] | None = None, timeout: float = 300,
              ) -> subprocess.CompletedProcess[str]:
    """The script run as `python SCRIPT ARGS` runs it once torch is imported (see above), in cwd
    (default: the script's folder), in env (default: this one), stdin /dev/null; its output as
    subprocess.run(capture_output=True, text=True) gives it; past timeout seconds it is killed
    (returncode -9)."""
    script = Path(script).resolve()
    return _run({"argv": [str(script), *args], "cwd": str(cwd or script.parent),
                 "timeout": timeout, "env": _environment(env)}, "python", sys.executable, True)


def run_module(module: str, *args: str | Path, cwd: str | Path, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS` in cwd, in env (default: this one), forked as run_plain's
    scripts are (torchrun's launcher: the processes it starts are python's own)."""
    return _run({"argv": [str(a) for a in args], "cwd": str(cwd), "timeout": timeout,
                 "module": module, "env": _environment(env)}, "python", sys.executable, True)


def run_gradtrace(*args: str | Path, cwd: str | Path | None = None,
                  env: dict[str, str] | None = None, timeout: float = 300,
                  python: str | Path = sys.executable, text: bool = True) -> Any:
    """`python -m gradtrace ARGS` run to its end in a process forked from one that imported
    torch and gradtrace once (env: all of it; python: another venv's interpreter)."""
    request, kind = _gradtrace_request(args, cwd, env, timeout)
    return _run(request, kind, str(python), text)


def start_gradtrace(*args: str | Path, stdout: Any = None,
                    stderr: Any = None, text: bool = False, closed: Sequence[int] = (),
                    sigint: bool = False, cwd: str | Path | None = None,
                    env: dict[str, str] | None = None, timeout: float = 300,
                    stdin: Any = None) -> Forked:
    """`python -m gradtrace ARGS` as subprocess.Popen starts it (stdout, stderr: None, PIPE,
    DEVNULL, a file or a descriptor; stdin: PIPE, a file or a descriptor, else /dev/null),
    closed: descriptors it lacks."""
    request, kind = _gradtrace_request(args, cwd, env, timeout)
    request.update(closed=list(closed), sigint=sigint)
    ours: list[int] = []  # the ends this process passes on, closed once they are

    def given(stream: Any, default: int) -> tuple[int, IO[bytes] | None]:
        if stream is None:
            return default, None
        if stream == subprocess.PIPE:
            read, write = os.pipe()
            ours.append(write)
            return write, os.fdopen(read, "rb")
        if stream == subprocess.DEVNULL:
            ours.append(os.open(os.devnull, os.O_RDWR))
            return ours[-1], None
        return (stream if isinstance(stream, int) else stream.fileno()), None

    piped_in = None
    if stdin == subprocess.PIPE:  # the child reads what the test writes
        fd_in, write_in = os.pipe()
        ours.append(fd_in)
        piped_in = os.fdopen(write_in, "wb")
    else:  # never the worker's: pytest-xdist talks on it
        fd_in, _ = given(subprocess.DEVNULL if stdin is None else stdin, 0)
    fd_out, piped_out = given(stdout, 1)
    fd_err, piped_err = given(stderr, 2)
    status_read, status_write = os.pipe()
    ours.append(status_write)
    try:
        pid = _start(request, kind, sys.executable, [fd_in, fd_out, fd_err, status_write])
    finally:
        for fd in ours:
            os.close(fd)
    forked = Forked(request["argv"], pid, status_read, piped_out, piped_err, text)
    forked.stdin = piped_in
    return forked


@functools.cache
def forwarding_command() -> Path:
    """A `gradtrace` executable for the processes tests start (torchrun's ranks, a shell): it
    has this process's server fork the run, passes signals on and exits as the run did."""
    command = Path(_own_folder("gradtrace-command-")) / "gradtrace"
    command.write_text(f"#!{sys.executable}\nimport sys\n"
                       f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                       f"from plain_python import forward\n"
                       f"forward({server_address('gradtrace')!r})\n")
    command.chmod(0o755)
    return command


def forward(address: str) -> NoReturn:
    """`gradtrace ARGV` forked by the server at address, as if this process ran it."""
    status_read, status_write = os.pipe()
    request = {"argv": sys.argv[1:], "cwd": os.getcwd(), "timeout": 600,
               "module": "gradtrace", "env": _environment(None)}
    pid = _forked(address, request, [0, 1, 2, status_write])
    os.close(status_write)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda n, _: _signal(pid, n))
    code = _exit_code(status_read)
    if code < 0:  # ended by a signal: so is this process
        if -code != signal.SIGKILL:  # the one whose handler cannot be set
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended already
        os.kill(pid, signum)


class Forked:
    """A process a server forked, as subprocess.Popen's (what tests use of one)."""

    def __init__(self, args: list[str], pid: int, status: int, stdout: IO[bytes] | None,
                 stderr: IO[bytes] | None, text: bool) -> None:
        self.args, self.pid, self._status, self._text = args, pid, status, text
        self.stdout, self.stderr = stdout, stderr
        self.stdin: IO[bytes] | None = None
        self.returncode: int | None = None

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            _signal(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code, once it ended (TimeoutExpired after timeout seconds)."""
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = _exit_code(self._status)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Everything the piped streams give until they end, then the exit code."""
        read: dict[str, bytes] = {}
        readers = [threading.Thread(target=lambda n=n, s=s: read.update({n: s.read()}))
                   for n, s in (("out", self.stdout), ("err", self.stderr)) if s is not None]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout)
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(timeout)
        got = [None if s is None else read[n] for n, s in (("out", self.stdout),
                                                            ("err", self.stderr))]
        return tuple(g.decode() if self._text and g is not None else g for g in got)


def _gradtrace_request(args: Sequence[str | Path], cwd: str | Path | None,
                       env: dict[str, str] | None, timeout: float) -> tuple[dict[str, Any], str]:
    """The request of `python -m gradtrace ARGS`, and the kind of server to fork it from."""
    env = _environment(env)
    # gradtrace imported anew when the environment changes what its import reads: forked
    # from the process that imported torch alone
    fresh = env.get(_READ_AT_IMPORT) != os.environ.get(_READ_AT_IMPORT)
    return ({"argv": [str(a) for a in args], "cwd": str(cwd or os.getcwd()),
             "timeout": timeout, "module": "gradtrace", "env": env},
            "python" if fresh else "gradtrace")


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    """A child's whole environment: env, or this process's."""
    return dict(os.environ if env is None else env)


def _run(request: dict[str, Any], kind: str, python: str, text: bool) -> Any:
    """The request run to its end, as subprocess.run(capture_output=True) runs it."""
    with open(os.devnull, "rb") as nothing, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        status_read, status_write = os.pipe()
        try:
            _start(request, kind, python, [nothing.fileno(), out.fileno(), err.fileno(),
                                           status_write])
        finally:
            os.close(status_write)
        code = _exit_code(status_read)
        got = []
        for stream in (out, err):
            stream.seek(0)
            got.append(stream.read())
    if text:  # as subprocess.run(text=True) reads them: universal newlines
        got = [b.decode().replace("\r\n", "\n").replace("\r", "\n") for b in got]
    return subprocess.CompletedProcess(request["argv"], code, *got)


def _start(request: dict[str, Any], kind: str, python: str, fds: list[int]) -> int:
    """The pid of the child the server of kind ("python": torch imported; "gradtrace":
    gradtrace too) run by python in the request's environment forked for the request."""
    started = tuple(request["env"].get(k) for k in _READ_AT_START)
    return _forked(server_address(kind, python, started), request, fds)


def _forked(address: str, request: dict[str, Any], fds: list[int]) -> int:
    """The pid of the child the server at address forked for the request."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.connect(address)
        socket.send_fds(connection, [json.dumps(request).encode()], fds)
        return int(connection.recv(64))


def _exit_code(status: int) -> int:
    """The exit code the server writes on the status pipe's read end status (closed)."""
    with os.fdopen(status, "rb") as pipe:
        return int(pipe.read())


def server_address(kind: str, python: str = sys.executable,
                   started: tuple[str | None, ...] | None = None) -> str:
    """The socket of the server of kind run by python, started in this environment (or one
    that reads `started` as it starts): one this process started, or starts now."""
    started = started or tuple(os.environ.get(k) for k in _READ_AT_START)
    with _lock:
        server, address = _servers.get((python, kind, started), (None, ""))
        if server is None or server.poll() is not None:
            address = os.path.join(_own_folder("gradtrace-fork-"), "socket")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            listener.bind(address)
            listener.listen(64)  # requests wait here while the server imports torch
            env = dict(os.environ)
            for name, value in zip(_READ_AT_START, started, strict=True):
                if value is None:
                    env.pop(name, None)
                else:
                    env[name] = value
            server = subprocess.Popen([python, __file__, kind, str(listener.fileno())],
                                      pass_fds=[listener.fileno()], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            listener.close()
            _servers[python, kind, started] = server, address
            atexit.register(server.kill)
        return address


def _own_folder(prefix: str) -> str:
    """A new temporary folder, removed as this process exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _run_in_child(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked child: `python ARGV` (or `python -m MODULE ARGV`) with the standard
    streams given, to its end, exiting as python exits."""
    _take_streams(fds, request.get("closed", ()))
    if request.get("sigint"):  # as python sets it up where SIGINT was not ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _enter(request)
    code, interrupted = 0, False
    try:
        _run_main(request)
    except SystemExit as exit_:  # python's: None is 0, an int itself, else printed and 1
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except BaseException as error:  # noqa: BLE001  (python's report of an uncaught exception)
        error.__traceback__ = _script_frames(error.__traceback__)  # what python prints
        sys.excepthook(type(error), error, error.__traceback__)
        code, interrupted = 1, isinstance(error, KeyboardInterrupt)
    threading._shutdown()  # type: ignore[attr-defined]  # as python's exit: waits for threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not stream.closed:  # json.tool closes its stdout
            stream.flush()
    if interrupted:  # python ends by SIGINT after an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _take_streams(fds: list[int], closed: Sequence[int]) -> None:
    """Descriptors 0-2 the request's, the others it came with closed, and those in closed
    (python started without a stdout has sys.stdout None)."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:  # copied to 0-2; the exit-code pipe is the server's to
        os.close(fd)                 # write: a copy here would hold its reader past the end
    for fd in closed:
        os.close(fd)
    if 1 in closed:
        sys.stdout = sys.__stdout__ = None  # type: ignore[assignment]


def _enter(request: dict[str, Any]) -> None:
    """The request's folder, environment, sys.argv and sys.path[0], as python sets them."""
    os.chdir(request["cwd"])
    if (process := sys.modules.get("multiprocessing.process")) is not None:
        process.ORIGINAL_DIR = os.getcwd()  # set as it is imported: python's start folder
    os.environ.clear()
    os.environ.update(request["env"])
    argv, module = request["argv"], request.get("module")
    sys.argv = [module, *argv] if module else argv  # runpy sets a module's argv[0]
    sys.orig_argv = [sys.executable, *(["-m", module] if module else []), *argv]
    sys.path[0] = request["cwd"] if module else str(Path(argv[0]).parent)


def _run_main(request: dict[str, Any]) -> None:
    """The script's code in a __main__ module made as python makes it (python -m runs a
    module by runpy, as this does)."""
    import runpy
    from importlib.machinery import SourceFileLoader

    if module := request.get("module"):
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    path = request["argv"][0]
    main = types.ModuleType("__main__")  # in python's order (python 3.10-3.13)
    vars(main).update(__loader__=SourceFileLoader("__main__", path), __annotations__={},
                      __builtins__=builtins, __file__=path, __cached__=None)
    sys.modules["__main__"] = main
    # dont_inherit: not this file's `from __future__ import annotations`
    exec(compile(Path(path).read_bytes(), path, "exec", dont_inherit=True), vars(main))


def _script_frames(frames: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback from the first frame that is not this file's."""
    while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
        frames = frames.tb_next
    return frames


# the exit-code pipes of the children running, and a lock over them
_held: set[int] = set()
_held_lock = threading.Lock()


def _serve(kind: str, listener: socket.socket) -> None:
    """Fork a child for each request on listener, until the tests' process is gone."""
    # imported once, before any fork: the point of this process (gradtrace only in the
    # server of its runs: a plain run's interpreter is python's)
    import torch  # noqa: F401

    # an optimizer's first step imports the compiler's front end (2 s, a run otherwise):
    # imported here once, as any script that trains has it soon after it starts
    import torch._dynamo  # noqa: F401

    if kind == "gradtrace":
        import gradtrace.capture.runner  # noqa: F401
        import gradtrace.cli  # noqa: F401

    parent = os.getppid()
    listener.settimeout(1)
    while os.getppid() == parent:  # until the tests' process is gone
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        with connection:
            fds: list[int] = []
            try:
                message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 4)
                request = json.loads(message)
                if len(fds) != 4:
                    raise ValueError("a request comes with 4 descriptors")
                with _held_lock:  # no exit-code pipe is being closed as the child copies them
                    pid = os.fork()
                    if pid == 0:
                        connection.close()
                        listener.close()
                        for fd in _held:  # another child's: its reader would wait for this one
                            os.close(fd)
                        try:
                            _run_in_child(request, fds)
                        except BaseException:  # noqa: BLE001  (a bug of this file's: shown,
                            traceback.print_exc()  # and the child never goes on to serve)
                        os._exit(70)
                    _held.add(fds[3])
            except (OSError, ValueError):  # a client that left or sent nonsense
                for fd in fds:
                    os.close(fd)
                continue
            for fd in fds[:3]:
                os.close(fd)
            with contextlib.suppress(OSError):  # a client gone: its run still ends, reported
                connection.send(str(pid).encode())
        threading.Thread(target=_report, args=(pid, fds[3], request["timeout"]),
                         daemon=True).start()


def _report(pid: int, status: int, timeout: float) -> None:
    """The child's exit code written to its status pipe; a child still running after
    timeout seconds is killed (-9)."""
    done = threading.Event()
    timer = threading.Timer(timeout, lambda: done.is_set() or os.kill(pid, 9))
    timer.start()
    _, waited = os.waitpid(pid, 0)
    done.set()
    timer.cancel()
    with _held_lock:
        try:
            os.write(status, str(os.waitstatus_to_exitcode(waited)).encode())
        except OSError:
            pass  # its reader left (a forwarding command killed): nobody to tell
        finally:
            os.close(status)
            _held.discard(status)


if __name__ == "__main__":
    _serve(sys.argv[1], socket.socket(fileno=int(sys.argv[2])))
