"""Hand-off: a job goes to its Celery queue exactly once, from whichever process gets there first.

The fast path (ARCHITECTURE "Fast path"): once a submit has committed, the
server hands the job to Celery itself, so a job's start never waits for the
outbox relay, Kafka and the dispatcher. The Kafka intake record is still
written (the durable log other consumers read); the dispatcher that reads it
hands over only what nobody handed yet: the server crashed between its commit
and the hand-off, or the sweeper re-announced the job.

"Handed" is a Redis key `handed:<job id>` taken with SET NX, in the Celery
broker's Redis (present in every deployment). It is taken as `pending` with a
short expiry, the task is sent, then it becomes `sent` with an expiry longer
than the broker's visibility timeout. A process that dies between the two lets
the short key lapse, so a later announcement hands the job again; a Redis that
restarted (the embedded one keeps nothing) lost the key with the queued task,
so the sweeper's re-announcement hands the job again. A duplicate task is
harmless: the claim is a compare-and-set.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

from paperworks.shared.bus.nudge import broker_redis
from paperworks.shared.config import Settings
from paperworks.shared.tasks.app import make_celery, task_name

log = logging.getLogger(__name__)

PENDING_TTL_S = 30  # a hand-off that takes longer than this died half-way


def handed_key(settings: Settings, job_id: str) -> str:
    return f"{settings.celery_key_prefix}paperworks.handed:{job_id}"


class Handoff:
    """Sends jobs of one service to its Celery queue, each once (see the module docstring)."""

    def __init__(self, settings: Settings, service: str):
        self.settings = settings
        self.service = service
        self._celery = None
        self._redis = broker_redis(settings, timeout_s=2.0)
        self._sent_ttl_s = 2 * settings.celery_visibility_timeout_s

    @property
    def celery(self):
        if self._celery is None:
            self._celery = make_celery(self.settings, self.service)
        return self._celery

    def take(self, job_ids: Sequence[str], force: bool = False) -> list[str]:
        """The jobs among `job_ids` nobody handed yet, now marked pending by this process
        (`force`: all of them, handed or not: the sweeper found them stranded)."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.set(handed_key(self.settings, job_id), b"pending", nx=not force,
                     ex=PENDING_TTL_S)
        return [job_id for job_id, won in zip(job_ids, pipe.execute(), strict=True) if won]

    def unhanded(self, job_ids: Sequence[str]) -> list[str]:
        """The jobs among `job_ids` that no live hand-off covers (for the sweeper)."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.exists(handed_key(self.settings, job_id))
        return [job_id for job_id, held in zip(job_ids, pipe.execute(), strict=True) if not held]

    def release(self, job_ids: Sequence[str]) -> None:
        """Lets go of taken jobs this process decided not to send (finished, cancelled, unknown)."""
        if job_ids:
            self._redis.delete(*(handed_key(self.settings, j) for j in job_ids))

    def send(self, job_ids: Sequence[str], mark: bool = True) -> None:
        """Sends taken jobs to Celery, then marks them sent (`mark=False`: the caller marks them
        with `mark_sent` later, within PENDING_TTL_S); a job whose send failed is let go."""
        if not job_ids:
            return
        try:  # one Redis pipeline for the batch's tasks (kombu's publish batch)
            with self.celery.producer_or_acquire() as producer, producer.batch():
                for job_id in job_ids:
                    self.celery.send_task(task_name(self.service), args=[job_id],
                                          task_id=job_id, queue=self.service,
                                          producer=producer)
        except BaseException:
            self.release(job_ids)
            raise
        if mark:
            self.mark_sent(job_ids)

    def mark_sent(self, job_ids: Sequence[str]) -> None:
        """Keeps sent jobs' keys past the broker's redelivery window."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.set(handed_key(self.settings, job_id), b"sent", ex=self._sent_ttl_s)
        pipe.execute()

    def hand(self, job_ids: Sequence[str], mark: bool = True) -> list[str]:
        """take + send (`mark` as for `send`): returns the jobs this call handed."""
        taken = self.take(job_ids)
        if taken:
            self.send(taken, mark=mark)
        return taken

    def close(self) -> None:
        self._redis.close()


class SubmitHandoff:
    """The server's side: `hand(job_id)` right after a submit committed, from a thread of the
    server's executor while the reply goes out. A lone submit is handed there and then (one
    thread hop fewer than through a queue); while another hand-off is under way, the job goes
    to one background thread, which hands whatever queued up in one batch (one Redis pipeline
    for the keys, one for the tasks) and marks the inline hand-offs' jobs sent. A failure here
    loses nothing: the dispatcher hands over what the server did not."""

    def __init__(self, settings: Settings, service: str):
        self._handoff = Handoff(settings, service)
        self._work: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._inline = threading.Lock()  # held by the one inline hand-off under way
        self._thread = threading.Thread(target=self._run, name=f"handoff-{service}", daemon=True)
        self._thread.start()

    def hand(self, job_id: str) -> None:
        if not self._inline.acquire(blocking=False):
            self._work.put(("hand", job_id))  # a concurrent submit: batched by the thread
            return
        try:
            if self._handoff.hand([job_id], mark=False):
                self._work.put(("mark", job_id))
        except Exception as exc:  # noqa: BLE001 - Redis down: the dispatcher hands it over
            log.warning("hand-off of job %s failed: %s (the dispatcher takes it)", job_id, exc)
        finally:
            self._inline.release()

    def _run(self) -> None:
        while (first := self._work.get()) is not None:
            batch = [first]
            while True:
                try:
                    more = self._work.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._work.put(None)
                    break
                batch.append(more)
            to_hand = [job_id for what, job_id in batch if what == "hand"]
            to_mark = [job_id for what, job_id in batch if what == "mark"]
            try:
                if to_hand:
                    self._handoff.hand(to_hand)
            except Exception as exc:  # noqa: BLE001 - Redis down: the dispatcher hands them over
                log.warning("hand-off of %d job(s) failed: %s (the dispatcher takes them)",
                            len(to_hand), exc)
            try:
                if to_mark:
                    self._handoff.mark_sent(to_mark)
            except Exception as exc:  # noqa: BLE001 - their pending keys lapse: a later
                log.warning("marking %d handed job(s) failed: %s", len(to_mark), exc)  # announcement
                # hands them again, and the claim makes the duplicate harmless

    def stop(self) -> None:
        self._work.put(None)
        self._thread.join(timeout=5)
        self._handoff.close()
