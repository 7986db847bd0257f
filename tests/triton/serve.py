#!/usr/bin/env python3
"""A real NVIDIA Triton Inference Server (CPU only) with models of known cost.

Started by infer-bench's tests as

    <venv>/bin/python tests/triton/serve.py --http-port P --grpc-port G --metrics-port M

where <venv> is the one scripts/setup-triton makes (nvidia-pytriton, Debian's
python3). Triton listens on 127.0.0.1 only. Once GET /v2/health/ready answers
200 this prints exactly one line, READY, on stdout; everything else (Triton's
log, pytriton's warnings; SERVE_LOG=DEBUG for more) goes to stderr, which the
caller must drain or send to a file. Start-up takes about 10-15 s (each model
is a python backend stub process, loaded one after another).

SIGTERM or SIGINT (also during start-up) unloads the models, stops tritonserver
and its stubs, removes pytriton's workspace ($PYTRITON_HOME, default
~/.cache/pytriton/workspace_*) and exits 0 within a few seconds; no process is
left behind. After SIGKILL the processes die with it (parent-death signal) but
the workspace stays.

Models (FP32, per-item input `images` [3, 224, 224], max_batch_size 32):
  classifier   sleeps 2 ms + 0.1 ms x batch per call, output `probs` [batch, 10]
               (a softmax of the per-item mean and range); no dynamic batching
  batched      the same, with Triton's dynamic batcher (max queue delay 2 ms)
  flaky        like classifier, but the 10th, 20th, ... call fails (HTTP 500)
  wrong_shape  declares `probs` [10] per item but returns [batch, 7]
  tokens       INT64 input `ids` [-1] (variable length), output `sum` INT64 [1]
  generate     decoupled (streaming), for Triton's generate extension: BYTES input
               `text_input` [1], optional INT32 `max_tokens` [1] (default 16),
               max_batch_size 1 (pytriton's least), no batcher; answers
               `max_tokens` responses of BYTES `text_output` [1], one word each
               ("tok "): the first 20 ms after the request reaches the model,
               then one every 5 ms (asyncio sleeps: requests overlap); the
               prompt "fail after one token" does, with an error event
  generate_once  the same, not decoupled, for /generate: one response with all
               `max_tokens` words, after 20 ms + 5 ms x (max_tokens - 1)
The sleep is a floor: pytriton's hand-off to this process adds ~3 ms per call.
See tests/triton/README.md for what the server answers.
"""

import argparse
import asyncio
import glob
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

IMAGE_SHAPE = (3, 224, 224)
NUM_CLASSES = 10
MAX_BATCH = 32
BASE_COST_S = 0.002       # per call
PER_ITEM_COST_S = 0.0001  # per item in the call's batch
FLAKY_EVERY = 10
READY_TIMEOUT_S = 120.0
UNLOAD_TIMEOUT_S = 15.0
MODELS = ("classifier", "batched", "flaky", "wrong_shape", "tokens", "generate", "generate_once",
          "colors", "colors_u8", "sentences", "blobs")
# colors, colors_u8: every item must be a picture of this colour (RGB), as
# the client decodes, scales and lays it out; anything else fails.
PICTURE_RGB = (255, 0, 128)
PICTURE_SIDE = 32
FIRST_TOKEN_S = 0.020  # generate: to its first response
TOKEN_GAP_S = 0.005    # generate: between later responses
DEFAULT_MAX_TOKENS = 16
FAIL_PROMPT = b"fail after one token"  # generate: errs mid-stream


def cost(batch_size: int) -> None:
    time.sleep(BASE_COST_S + PER_ITEM_COST_S * batch_size)


def probs_of(images: np.ndarray, classes: int = NUM_CLASSES) -> np.ndarray:
    """A softmax over `classes` logits made from each item's mean and range.

    Over every 1009th value only, so that it costs next to nothing beside the
    sleep (under 50 us for a batch of 32), yet still depends on the input.
    """
    flat = images.reshape(images.shape[0], -1)[:, ::1009]
    mean = flat.mean(axis=1, keepdims=True)
    spread = flat.max(axis=1, keepdims=True) - flat.min(axis=1, keepdims=True)
    k = np.arange(classes, dtype=np.float32)[None, :]
    logits = mean * (k - classes / 2) / classes + spread * np.cos(k)
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


@batch
def classify(images: np.ndarray):
    cost(images.shape[0])
    return {"probs": probs_of(images)}


class Flaky:
    """Every FLAKY_EVERY-th call raises; Triton answers that request with an error."""

    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    @batch
    def __call__(self, images: np.ndarray):
        with self.lock:
            self.calls += 1
            n = self.calls
        cost(images.shape[0])
        if n % FLAKY_EVERY == 0:
            raise RuntimeError(f"flaky: call {n} fails on purpose (every {FLAKY_EVERY}th call)")
        return {"probs": probs_of(images)}


@batch
def wrong_shape(images: np.ndarray):
    cost(images.shape[0])
    return {"probs": probs_of(images, classes=7)}


@batch
def token_sum(ids: np.ndarray):
    cost(ids.shape[0])
    return {"sum": ids.sum(axis=1, keepdims=True).astype(np.int64)}


def check_colour(means: np.ndarray, scale: float, what: str) -> None:
    """Raises unless each row of `means` (per item, per channel) is PICTURE_RGB / scale."""
    want = np.array(PICTURE_RGB, dtype=np.float64) / scale
    worst = float(np.abs(means - want[None, :]).max())
    if worst > 8.0 / scale:  # a JPEG's rounding, well inside a wrong layout's error
        raise ValueError(f"{what}: channel means {means.tolist()}, expected {want.tolist()}")


@batch
def colors(images: np.ndarray):
    """FP32 [3, H, W] pictures scaled to 0..1 ("unit"): their channel means."""
    means = images.astype(np.float64).mean(axis=(2, 3))
    check_colour(means, 255.0, "colors")
    return {"means": means.astype(np.float32)}


@batch
def colors_u8(images: np.ndarray):
    """UINT8 [H, W, 3] pictures, pixel values as they are ("raw")."""
    means = images.astype(np.float64).mean(axis=(1, 2))
    check_colour(means, 1.0, "colors_u8")
    return {"means": means.astype(np.float32)}


@batch
def sentences(text: np.ndarray):
    """BYTES [2] per item: each element must be a line "sentence N" of the client's file."""
    for item in text:
        for e in item:
            word, _, n = bytes(e).partition(b" ")
            if word != b"sentence" or not n.isdigit():
                raise ValueError(f"sentences: an element {bytes(e)[:40]!r} is no line of the file")
    return {"length": np.array([[sum(len(bytes(e)) for e in item)] for item in text], dtype=np.int32)}


@batch
def blobs(blob: np.ndarray):
    """BYTES [1] per item: each element a whole PNG or JPEG file, as a DALI pipeline takes it."""
    for item in blob:
        b = bytes(item[0])
        if not (b.startswith(b"\x89PNG\r\n\x1a\n") or b.startswith(b"\xff\xd8\xff")) or len(b) < 100:
            raise ValueError(f"blobs: an element of {len(b)} bytes is no whole picture file")
    return {"length": np.array([[len(bytes(item[0]))] for item in blob], dtype=np.int32)}


async def generate(requests):
    """One request at a time (no batching): `max_tokens` responses, one word each.

    An async generator, so that pytriton runs it on its event loop and
    concurrent requests interleave instead of queueing behind a sleep.
    """
    (req,) = requests  # max_batch_size 1: each input is [1, 1]
    n = int(req["max_tokens"].reshape(-1)[0]) if "max_tokens" in req else DEFAULT_MAX_TOKENS
    word = np.array([[b"tok "]], dtype=np.bytes_)
    fail = "text_input" in req and req["text_input"].reshape(-1)[0] == FAIL_PROMPT
    for i in range(n):
        await asyncio.sleep(FIRST_TOKEN_S if i == 0 else TOKEN_GAP_S)
        if fail and i == 1:
            raise RuntimeError("generate: fails after one token on purpose")
        yield [{"text_output": word}]


async def generate_once(requests):
    """`generate`'s words as one response, at the time its last would come."""
    (req,) = requests
    n = int(req["max_tokens"].reshape(-1)[0]) if "max_tokens" in req else DEFAULT_MAX_TOKENS
    await asyncio.sleep(FIRST_TOKEN_S + TOKEN_GAP_S * max(n - 1, 0))
    return [{"text_output": np.array([[b"tok " * n]], dtype=np.bytes_)}]


def wait_ready(port: int, triton: Triton, deadline: float) -> bool:
    url = f"http://127.0.0.1:{port}/v2/health/ready"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        if not triton.is_alive():
            return False
        time.sleep(0.05)
    return False


def proc_stat(pid: int):
    """(comm, ppid, start time) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            head, rest = f.read().rsplit(")", 1)
    except OSError:
        return None
    fields = rest.split()
    return head.split("(", 1)[1], int(fields[1]), fields[19]


def tritonserver_tree() -> dict:
    """pid -> start time of this process's tritonserver and everything below it."""
    stats = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := proc_stat(int(d))) is not None:
            stats[int(d)] = st
    found = {pid: st[2] for pid, st in stats.items()
             if st[1] == os.getpid() and st[0] == "tritonserver"}
    todo = list(found)
    while todo:
        parent = todo.pop()
        for pid, st in stats.items():
            if st[1] == parent and pid not in found:
                found[pid] = st[2]
                todo.append(pid)
    return found


def unload_models(port: int) -> None:
    """Asks Triton to unload every model and waits until their python stubs exit.

    Triton's own shutdown first waits up to exit_timeout_secs for *idle*
    keep-alive HTTP connections to close, and then drops the models still
    loaded (non-graceful; a stub can outlive it). Unloading first makes the
    stop fast and clean whatever the clients do.
    """
    for name in MODELS:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v2/repository/models/{name}/unload", data=b"", method="POST")
        try:
            urllib.request.urlopen(req, timeout=5).read()
        except (urllib.error.URLError, OSError):
            pass
    deadline = time.monotonic() + UNLOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        stubs = [pid for pid in tritonserver_tree()
                 if (st := proc_stat(pid)) and st[0].startswith("triton_python")]
        if not stubs:
            break
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--grpc-port", type=int, required=True)
    ap.add_argument("--metrics-port", type=int, required=True)
    args = ap.parse_args()

    # pytriton echoes tritonserver's log to stdout, and the python backend
    # stubs inherit it: point fd 1 at stderr for everyone and keep the real
    # stdout only for the READY line.
    sys.stdout.flush()
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    # SERVE_LOG=DEBUG (or INFO, ...) shows pytriton's own logging. By default
    # only warnings, and not the traceback pytriton logs for every failed
    # inference (flaky fails on purpose), so that stderr stays small.
    level = os.environ.get("SERVE_LOG", "").upper()
    logging.basicConfig(level=getattr(logging, level or "WARNING"), stream=sys.stderr,
                        format="serve.py: %(asctime)s %(levelname)s %(name)s: %(message)s")
    if not level:
        logging.getLogger("pytriton.proxy.inference").setLevel(logging.ERROR)

    stop = threading.Event()
    serving = False

    def on_signal(*_):
        stop.set()
        if not serving:  # still starting: abandon the start-up (finally stops)
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    config = TritonConfig(
        http_address="127.0.0.1", http_port=args.http_port,
        grpc_address="127.0.0.1", grpc_port=args.grpc_port,
        metrics_address="127.0.0.1", metrics_port=args.metrics_port,
        log_verbose=0,
        exit_timeout_secs=1,  # models are unloaded before (see unload_models)
    )
    images = [Tensor(name="images", dtype=np.float32, shape=IMAGE_SHAPE)]
    probs = [Tensor(name="probs", dtype=np.float32, shape=(NUM_CLASSES,))]
    plain = ModelConfig(max_batch_size=MAX_BATCH, batcher=None)
    # restricted_endpoints=[]: pytriton would otherwise guard statistics,
    # logging, trace, shared memory and the repository API behind a random
    # token header; the tests read /v2/models/<m>/stats.
    triton = Triton(config=config, security_config=TritonSecurityConfig(restricted_endpoints=[]))
    try:
        triton.bind("classifier", classify, images, probs, config=plain)
        triton.bind("batched", classify, images, probs,
                    config=ModelConfig(max_batch_size=MAX_BATCH,
                                       batcher=DynamicBatcher(max_queue_delay_microseconds=2000)))
        triton.bind("flaky", Flaky(), images, probs, config=plain)
        triton.bind("wrong_shape", wrong_shape, images, probs, config=plain)
        triton.bind("tokens", token_sum,
                    [Tensor(name="ids", dtype=np.int64, shape=(-1,))],
                    [Tensor(name="sum", dtype=np.int64, shape=(1,))], config=plain)
        means = [Tensor(name="means", dtype=np.float32, shape=(3,))]
        triton.bind("colors", colors,
                    [Tensor(name="images", dtype=np.float32,
                            shape=(3, PICTURE_SIDE, PICTURE_SIDE))],
                    means, config=plain)
        triton.bind("colors_u8", colors_u8,
                    [Tensor(name="images", dtype=np.uint8,
                            shape=(PICTURE_SIDE, PICTURE_SIDE, 3))],
                    means, config=plain)
        length = [Tensor(name="length", dtype=np.int32, shape=(1,))]
        triton.bind("sentences", sentences,
                    [Tensor(name="text", dtype=np.bytes_, shape=(2,))], length, config=plain)
        triton.bind("blobs", blobs,
                    [Tensor(name="blob", dtype=np.bytes_, shape=(1,))], length, config=plain)
        triton.bind("generate", generate,
                    [Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
                     Tensor(name="max_tokens", dtype=np.int32, shape=(1,), optional=True)],
                    [Tensor(name="text_output", dtype=np.bytes_, shape=(1,))],
                    config=ModelConfig(max_batch_size=1, batcher=None, decoupled=True))
        triton.bind("generate_once", generate_once,
                    [Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
                     Tensor(name="max_tokens", dtype=np.int32, shape=(1,), optional=True)],
                    [Tensor(name="text_output", dtype=np.bytes_, shape=(1,))],
                    config=ModelConfig(max_batch_size=1, batcher=None))
        # pytriton waits 120 s for a tritonserver that already exited (e.g.
        # a port in use): a watchdog interrupts the start-up instead.
        died = threading.Event()

        def watchdog():
            seen = False
            while not serving and not stop.is_set():
                alive = bool(tritonserver_tree())
                if seen and not alive:
                    died.set()
                    # a real signal, so that a blocking call returns too
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                    return
                seen |= alive
                time.sleep(0.1)

        threading.Thread(target=watchdog, daemon=True).start()
        try:
            triton.run()  # starts tritonserver, loads the models, waits for them
            if not wait_ready(args.http_port, triton, time.monotonic() + READY_TIMEOUT_S):
                print("serve.py: error: Triton did not become ready", file=sys.stderr)
                return 1
            serving = True
        except KeyboardInterrupt:
            if died.is_set():
                print("serve.py: error: tritonserver exited during start-up (its log is above)",
                      file=sys.stderr)
                return 1
            return 0
        ready_out.write("READY\n")
        ready_out.flush()
        while not stop.wait(0.5):
            if not triton.is_alive():
                print("serve.py: error: Triton or a model stopped", file=sys.stderr)
                return 1
        unload_models(args.http_port)
        return 0
    finally:
        tree = tritonserver_tree()
        triton.stop()
        # Safety net: nothing below tritonserver may outlive this process.
        for pid, start in tree.items():
            if (st := proc_stat(pid)) is not None and st[2] == start:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        # The python backend's shared memory regions (named after pytriton's
        # prefix, pytrtion<pid>-...) remain when a stub was killed.
        for leftover in glob.glob(f"/dev/shm/pytrtion{os.getpid()}-*"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main())
