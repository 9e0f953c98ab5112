"""Running jobs in parallel: spawned local worker processes (default) or a Ray cluster.

Both backends hand every finished job's records to a callback at once (the store writes them
before anything else happens), and turn every way a job can fail into failed records: an
exception inside the job (``points.run_job`` catches it), a worker process that dies (killed, out
of memory, a crash in native code) and a job that outlives the spec's ``point_timeout_s``.

Local workers are ``spawn``-ed (JAX is not fork-safe), each runs one job at a time and is reused
for the next, and each exits on its own when the sweep process is gone (a SIGKILLed sweep leaves
no orphan burning CPU).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait

from asicsim._src.sweep.points import Job, failed, run_job

OnRecords = Callable[[list[dict]], None]


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(3)
        time.sleep(0.5)


def _worker_main(conn, parent: int) -> None:
    """A worker: run each job the sweep sends until it sends None (or the sweep dies)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the sweep, which stops its workers
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(run_job(job))


class _Worker:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, os.getpid()), daemon=True)
        self.proc.start()
        child.close()
        self.job: Job | None = None
        self.started = 0.0

    def give(self, job: Job) -> None:
        self.job, self.started = job, time.monotonic()
        self.conn.send(job)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def _death(proc) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def timed_out(elapsed: float, timeout_s: float) -> str:
    """A timed-out point's reason: no result (a slow machine is no divergence) and what to do."""
    return (f"timed out after {elapsed:.0f} s (point_timeout_s = {timeout_s:g}): no result; raise "
            "point_timeout_s in the spec (or remove it) and rerun with --retry-failed")


def run_local(jobs: list[Job], on_records: OnRecords, workers: int, timeout_s: float | None = None) -> None:
    """Run ``jobs`` on ``workers`` spawned processes."""
    ctx = mp.get_context("spawn")
    pending = deque(jobs)
    # started together, so their imports overlap (a job is handed over once a worker reads it)
    pool: list[_Worker] = [_Worker(ctx) for _ in range(min(workers, len(jobs)))]
    try:
        while pending or any(w.job for w in pool):
            for w in [w for w in pool if w.job is None and not w.proc.is_alive()]:
                pool.remove(w)  # an idle worker that died (killed between jobs): replace it
            while pending and (len(pool) < workers or any(w.job is None for w in pool)):
                idle = next((w for w in pool if w.job is None), None)
                if idle is None:
                    idle = _Worker(ctx)
                    pool.append(idle)
                try:
                    idle.give(pending.popleft())
                except OSError:  # it died just now; its job is checked (and failed) below
                    pass
            busy = [w for w in pool if w.job is not None]
            wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.5)
            for w in busy:
                job = w.job
                if w.conn.poll():
                    try:
                        records = w.conn.recv()
                    except (EOFError, OSError):
                        records = None
                    if records is not None:
                        w.job = None
                        on_records(records)
                        continue
                elapsed = time.monotonic() - w.started
                if not w.proc.is_alive():
                    w.proc.join()
                    on_records(failed(job, f"worker process died ({_death(w.proc)}) while running this "
                                           "point: killed, out of memory, or crashed", elapsed))
                elif timeout_s is not None and elapsed > timeout_s:
                    w.stop(kill=True)
                    on_records(failed(job, timed_out(elapsed, timeout_s), elapsed))
                else:
                    continue
                pool.remove(w)  # replaced by a fresh worker when there is work left
    finally:
        for w in pool:
            w.stop(kill=w.job is not None)


def connect_ray(address: str, workers: int):
    """Ray, connected to ``address`` (``auto``, ``local`` or HOST:PORT); a SweepError, after a bounded
    wait, where no Ray cluster answers there."""
    if address not in ("auto", "local"):
        _reachable(address)  # before importing Ray: a typo is said at once
    try:
        import ray
    except ImportError:
        from asicsim._src.sweep.spec import SweepError

        raise SweepError("--ray needs Ray: pip install 'asicsim[ray]'") from None
    if ray.is_initialized():
        return ray

    def start_local() -> None:
        ray.init(num_cpus=workers, log_to_driver=False, include_dashboard=False)

    if address == "auto":  # the cluster running on this machine, or a new local instance
        try:
            ray.init(address="auto", log_to_driver=False)
        except (ConnectionError, RuntimeError):
            start_local()
    elif address == "local":
        start_local()
    else:
        _bounded(lambda: ray.init(address=address, log_to_driver=False), address)
    return ray


#: Seconds to wait for a Ray cluster to answer (ray.init retries an address forever).
RAY_CONNECT_S = 60.0


def _ray_error(address: str, why: str):
    from asicsim._src.sweep.spec import SweepError

    return SweepError(f"--ray {address!r}: {why}; allowed: 'auto' (the cluster running here, else a new local "
                      "one), 'local', or HOST:PORT (ray://HOST:PORT) of a running Ray head node (ray start --head)")


def _reachable(address: str, timeout_s: float = 10.0) -> None:
    """Raise SweepError unless something listens at ``address`` (HOST:PORT, ray://HOST[:PORT])."""
    import socket
    from urllib.parse import urlsplit

    text = address if "://" in address else f"ray-gcs://{address}"
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port or (10001 if parts.scheme == "ray" else None)
    except ValueError as err:
        raise _ray_error(address, f"not an address ({err})") from None
    if not host or port is None:
        raise _ray_error(address, "not HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror as err:
        raise _ray_error(address, f"no such host {host!r} ({err.strerror or err})") from None
    except TimeoutError:
        raise _ray_error(address, f"no answer from {host}:{port} within {timeout_s:g} s") from None
    except OSError as err:
        raise _ray_error(address, f"nothing listens at {host}:{port} ({err.strerror or err})") from None


def _bounded(connect: Callable[[], object], address: str) -> None:
    """``connect()`` (ray.init) in a thread, waited for :data:`RAY_CONNECT_S` seconds at most."""
    done: list = []

    def run() -> None:
        try:
            connect()
            done.append(None)
        except BaseException as err:  # handed to the caller
            done.append(err)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(RAY_CONNECT_S)
    if not done:
        raise _ray_error(address, f"something listens there, but no Ray cluster answered within {RAY_CONNECT_S:g} s")
    if done[0] is not None:
        raise _ray_error(address, f"{type(done[0]).__name__}: {str(done[0])[:300]}") from done[0]


def run_ray(jobs: list[Job], on_records: OnRecords, address: str, workers: int,
            timeout_s: float | None = None) -> None:
    """Run ``jobs`` as Ray tasks (at most ``workers`` in flight); the records come back to this
    process, which writes them, so the store needs no shared file system."""
    ray = connect_ray(address, workers)
    remote = ray.remote(max_retries=0, num_cpus=1)(run_job)
    pending = deque(jobs)
    flight: dict = {}  # ObjectRef -> (job, start)
    try:
        while pending or flight:
            while pending and len(flight) < workers:
                job = pending.popleft()
                flight[remote.remote(job)] = (job, time.monotonic())
            ready, _ = ray.wait(list(flight), num_returns=1, timeout=0.5)
            for ref in ready:
                job, t0 = flight.pop(ref)
                try:
                    on_records(ray.get(ref))
                except Exception as err:  # a dead worker, OOM kill, cancelled task...
                    on_records(failed(job, f"Ray task failed: {type(err).__name__}: {str(err)[:500]}",
                                      time.monotonic() - t0))
            if timeout_s is not None:
                now = time.monotonic()
                for ref, (job, t0) in list(flight.items()):
                    if now - t0 > timeout_s:
                        ray.cancel(ref, force=True)
                        flight.pop(ref)
                        on_records(failed(job, timed_out(now - t0, timeout_s), now - t0))
    finally:
        for ref in flight:
            ray.cancel(ref, force=True)
