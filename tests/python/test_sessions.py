"""The session protocol of the streamlearn Python client against a hand-written fake cluster
(fake_cluster.py): faults a real server produces only by chance are injected per batch.

- a retryable ack (UNAVAILABLE, ABORTED) cancels the stream and resends its unacknowledged
  batches in order: every event applied once, in order, each batch's final ack once;
- a permanent refusal is reported once and not resent;
- NOT-OWNER after a takeover: batches and queries follow the new owner;
- a batch left unanswered (a paused server) is resent after ack_timeout;
- a shard's batches never are in flight on two streams at once;
- resend=False: a retryable status is final, a stream left unanswered ends the session;
- the session gives up with the last error after retry_timeout without progress.

Run by ctest (python_client.sessions) with the python of the venv python_client.install made.
"""

import threading
import unittest
from typing import List

import harness
from fake_cluster import ABORTED, UNAVAILABLE, FakeCluster

import streamlearn
from streamlearn import errors

D, DV = 2, 1


def events(first: int, count: int) -> List[tuple]:
    return [(t, [0.1, 0.2], [1.0]) for t in range(first, first + count)]


class Once:
    """A fault that fires the first time a batch starting at t = `at` is seen."""

    def __init__(self, at: int, answer: tuple, server: int = None) -> None:
        self.at, self.answer, self.server = at, answer, server
        self.fired = threading.Event()

    def __call__(self, server: int, shard: int, batch: list):
        if batch[0].t == self.at and not self.fired.is_set() and \
                self.server in (None, server):
            self.fired.set()
            return self.answer
        return None


class SessionProtocolTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = FakeCluster(shards=3, servers=2)
        self.addCleanup(self.cluster.stop)
        self.client = streamlearn.Client(self.cluster.addresses[0], retry_timeout=60.0)
        self.addCleanup(self.client.close)
        self.key = "k"
        self.shard = streamlearn.shard_for(self.key, 3)
        self.results = []

    def session(self, **options):
        options.setdefault("batch_size", 5)
        options.setdefault("on_ack", self.results.append)
        return self.client.ingest_session(self.cluster.name, routing_key=self.key, **options)

    def assert_each_batch_once(self, batches: int) -> None:
        self.assertEqual(sorted(r.index for r in self.results), list(range(batches)))

    def test_a_retryable_ack_resends_the_rest_in_order(self) -> None:
        for code in (UNAVAILABLE, ABORTED):
            with self.subTest(code=code):
                self.results.clear()
                start = len(self.cluster.applied[self.shard]) + 1
                self.cluster.fault = Once(start + 10, ("status", code, "try again"))
                with self.session(window=8) as s:
                    s.send(events(start, 50))
                self.assertEqual(self.cluster.applied[self.shard],
                                 list(range(1, start + 50)))
                self.assert_each_batch_once(10)
                self.assertTrue(all(r.ok for r in self.results))
                self.assertGreaterEqual(s.stats.resends, 1)
                self.assertEqual(s.stats.stream_failures, 1)
                self.assertEqual(s.stats.applied + s.stats.duplicates, 50)
                self.assertEqual(s.stats.applied, 50)  # nothing failed was applied
                self.assertEqual(next(r for r in self.results if r.index == 2).attempts, 2)

    def test_a_permanent_refusal_is_reported_once_and_not_resent(self) -> None:
        self.cluster.fault = Once(11, ("status", 3, "event 0 (t=11): k has 3 values"))
        s = self.session(window=8, raise_on_reject=False)
        with s:
            s.send(events(1, 50))
        self.assert_each_batch_once(10)
        self.assertEqual([r.index for r in self.results if not r.ok], [2])
        self.assertEqual((s.stats.resends, s.stats.rejected, s.stats.applied), (0, 1, 45))
        self.assertIsInstance(s.rejected[0], errors.InvalidArgument)
        self.assertEqual(s.rejected[0].batch_index, 2)
        self.assertEqual(self.cluster.applied[self.shard],
                         [t for t in range(1, 51) if not 11 <= t <= 15])

    def test_batches_and_queries_follow_the_owner_after_a_takeover(self) -> None:
        with self.session(window=4) as s:
            s.send(events(1, 20))
            s.flush()
            self.cluster.move(self.shard, 1)   # the old owner answers NOT-OWNER now
            s.send(events(21, 20))
        self.assertEqual(self.cluster.applied[self.shard], list(range(1, 41)))
        self.assert_each_batch_once(8)
        self.assertGreaterEqual(s.stats.resends, 1)
        late = [server for server, shard, t in self.cluster.received if t > 20 and
                server == 1]
        self.assertTrue(late)
        answer = self.client.query(self.cluster.name, [0.1, 0.2], routing_key=self.key)
        self.assertEqual(answer.events, 40)
        # A query to the old owner (its map is stale) is retried at the new one.
        self.cluster.move(self.shard, 0)
        self.assertEqual(self.client.query(self.cluster.name, [0.1, 0.2],
                                           routing_key=self.key).events, 40)

    def test_an_unanswered_batch_is_resent_after_ack_timeout(self) -> None:
        self.cluster.fault = Once(11, ("hold",))
        with self.session(window=8, ack_timeout=0.5) as s:
            s.send(events(1, 30))
        self.assertTrue(self.cluster.fault.fired.is_set())
        self.assertEqual(self.cluster.applied[self.shard], list(range(1, 31)))
        self.assert_each_batch_once(6)
        self.assertGreaterEqual(s.stats.resends, 1)

    def test_a_shard_stays_on_its_stream_while_batches_await_acks(self) -> None:
        # Batches of the shard wait on server 0 when the map moves it to server 1: the new
        # ones queue behind them on the same stream (which answers NOT-OWNER from the move on,
        # and the server's rule keeps the rest unapplied), then all go to server 1 in order.
        hold = threading.Event()

        def slow(server, shard, batch):
            if server == 0 and batch[0].t == 6:
                hold.wait(30)
            return None

        self.cluster.fault = slow
        with self.session(window=16) as s:
            s.send(events(1, 10))            # batch 2 (t 6..10) waits at server 0
            self.cluster.move(self.shard, 1)
            self.client.shard_map(self.cluster.name)   # the client knows the new owner now
            s.send(events(11, 10))           # must not overtake on a stream to server 1
            hold.set()
        self.assertEqual(self.cluster.applied[self.shard], list(range(1, 21)))
        self.assert_each_batch_once(4)

    def test_without_resending_a_retryable_ack_is_final(self) -> None:
        self.cluster.fault = Once(11, ("status", UNAVAILABLE, "NOT-OWNER: moving"))
        s = self.session(window=1, resend=False, raise_on_reject=False)
        with s:
            s.send(events(1, 30))
        self.assert_each_batch_once(6)
        # The server holds back the shard's later batches on the stream: what it applied is a
        # prefix of what was sent, and the rest is the caller's to send again.
        self.assertEqual([r.index for r in self.results if not r.ok], [2, 3, 4, 5])
        self.assertIsInstance(s.rejected[0], errors.Unavailable)
        self.assertEqual((s.stats.resends, s.stats.rejected, s.stats.applied), (0, 4, 10))
        self.assertEqual(self.cluster.applied[self.shard], list(range(1, 11)))
        # A stream left unanswered ends such a session with its error.
        self.cluster.fault = Once(41, ("hold",))
        s = self.session(resend=False, ack_timeout=0.3)
        with self.assertRaises(errors.Unavailable):
            with s:
                s.send(events(41, 10))

    def test_the_session_gives_up_after_retry_timeout(self) -> None:
        self.cluster.fault = lambda server, shard, batch: ("status", UNAVAILABLE, "down")
        s = self.client.ingest_session(self.cluster.name, routing_key=self.key,
                                       retry_timeout=0.5)
        with self.assertRaises(errors.Unavailable) as e:
            with s:
                s.send(events(1, 3))
        self.assertEqual(e.exception.message, "down")
        self.assertEqual(e.exception.details["unacknowledged_batches"], 1)
        self.assertEqual(self.cluster.applied[self.shard], [])


if __name__ == "__main__":
    args = harness.parse_args()
    unittest.main(argv=args.unittest_argv, verbosity=2)
