"""The preloading worker daemon: everything it preloads imports, and workers forked after the preload work.

The daemon itself runs in every Spark test of the job (jobs/job.py sets `spark.python.daemon.module`); this
checks the part that is ours, in a separate process, with forks done the way pyspark.daemon does them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD_WORK = textwrap.dedent("""
    import io, os, sys
    os.environ["JE_ARROW_MALLOC_CONF"] = "background_thread:false"
    from jobs.spark_daemon import preload
    assert preload() == [], preload()
    import pyarrow as pa
    import pyarrow.ipc
    from jobs.records import enrich
    from jobs.warm import SAMPLE
    pids = []
    for i in range(4):
        pid = os.fork()
        if pid == 0:  # a forked worker: Arrow allocation and IPC, msgspec decoding, LZ4
            try:
                batch = pa.RecordBatch.from_pydict({"value": [SAMPLE] * 1000})
                sink = io.BytesIO()
                with pa.ipc.new_stream(sink, batch.schema) as w:
                    w.write_batch(batch)
                key, out = enrich(SAMPLE)
                import lz4.frame
                assert key == b"warm-0" and b"nearest_landmark" in lz4.frame.decompress(lz4.frame.compress(out))
            except BaseException:
                os._exit(1)
            os._exit(0)
        pids.append(pid)
    codes = [os.waitpid(p, 0)[1] for p in pids]
    print(codes)
    sys.exit(1 if any(codes) else 0)
""")


def test_forked_workers_use_the_preloaded_modules() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD_WORK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[0, 0, 0, 0]"
