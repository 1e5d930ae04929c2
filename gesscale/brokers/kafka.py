"""The embedded Kafka-compatible broker: start it from code, get its bootstrap address, stop it.

No Apache Kafka distribution is reachable from the machines this toolkit targets, so a laptop run uses a
Kafka-compatible broker from PyPI (docs/data-plane.md). `noida-db` is the default because it passes the
conformance tests in tests/brokers (see docs/data-plane.md); `tansu` can be chosen when its binary is on PATH
(or named by `GESSCALE_TANSU_BIN`), but it gets end offsets and time lookups wrong. Everything else in the
toolkit takes a bootstrap address, so a real Kafka is used simply by passing its address instead.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType

from gesscale.errors import UserError, brief
from gesscale.process import ManagedProcess, check_port, spawn, wait_until_listening

KAFKA_IMPLS = ("noida-db", "tansu")
DEFAULT_KAFKA_IMPL = "noida-db"
HOST = "127.0.0.1"


def _noida_binary() -> str:
    """Path of the native noida-db binary shipped inside the `noida_db` wheel (spawned directly, no wrapper)."""
    try:
        path = resources.files("noida_db").joinpath("noida-db")
    except ModuleNotFoundError:
        raise UserError("noida-db is not installed (pip install noida-db==0.2.3)") from None
    if not path.is_file():
        raise UserError(f"noida-db binary missing at {path}")
    if not os.access(str(path), os.X_OK):
        os.chmod(str(path), 0o755)
    return str(path)


def _tansu_binary() -> str:
    given = os.environ.get("GESSCALE_TANSU_BIN")
    path = given or shutil.which("tansu")
    if not path:
        raise UserError("tansu binary not found: put it on PATH or set GESSCALE_TANSU_BIN")
    if given and not (os.path.isfile(given) and os.access(given, os.X_OK)):
        raise UserError(f"GESSCALE_TANSU_BIN must name an executable file, got {brief(given)}")
    return path


def kafka_argv(impl: str, port: int, data_dir: Path) -> list[str]:
    """The command line that runs broker `impl` on 127.0.0.1:port with its data under `data_dir`."""
    if impl == "noida-db":
        return [
            _noida_binary(), "start", "--only", "kafka", "--kafka-port", str(port),
            "--host", HOST, "--data-dir", str(data_dir),
        ]  # fmt: skip
    if impl == "tansu":
        url = f"tcp://{HOST}:{port}"
        return [
            _tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
    raise UserError(f"unknown Kafka broker {impl!r}; expected one of {', '.join(KAFKA_IMPLS)}")


@dataclass
class KafkaBroker:
    """A running embedded Kafka-compatible broker; `bootstrap` is what clients connect to.

    Use as a context manager or call `stop()`. `restart()` keeps the data directory (used to check that data
    survives a restart and to exercise the producer's retries).
    """

    port: int
    data_dir: Path
    impl: str
    process: ManagedProcess
    start_timeout_s: float = field(default=30.0, repr=False)

    @property
    def bootstrap(self) -> str:
        """`host:port` for the clients' bootstrap_servers."""
        return f"{HOST}:{self.port}"

    def alive(self) -> bool:
        """True while the broker process runs."""
        return self.process.alive()

    def stop(self) -> None:
        """Stop the broker gracefully (SIGTERM, SIGKILL after 10 s); idempotent."""
        self.process.stop()

    def kill(self) -> None:
        """Kill the broker at once (a crash), leaving its data directory as it is."""
        self.process.kill()

    def restart(self) -> None:
        """Stop the broker (if running) and start it again on the same port and data directory."""
        self.stop()
        self.process = _launch(self.impl, self.port, self.data_dir, self.start_timeout_s)

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None):
        self.stop()


def _launch(impl: str, port: int, data_dir: Path, timeout_s: float) -> ManagedProcess:
    argv = kafka_argv(impl, port, data_dir)
    check_port(port, "Kafka", HOST)
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = spawn(argv, data_dir / f"{impl}.log", cwd=data_dir)
    wait_until_listening(proc, port, f"Kafka broker ({impl})", timeout_s)
    return proc


def start_kafka(
    port: int, data_dir: Path, impl: str = DEFAULT_KAFKA_IMPL, *, timeout_s: float = 30.0
) -> KafkaBroker:
    """Start an embedded Kafka-compatible broker on 127.0.0.1:port and wait until it accepts connections.

    Raises UserError when the port is taken, the binary is missing or the broker exits at start-up.
    """
    data_dir = Path(data_dir).resolve()
    proc = _launch(impl, port, data_dir, timeout_s)
    return KafkaBroker(port=port, data_dir=data_dir, impl=impl, process=proc, start_timeout_s=timeout_s)
