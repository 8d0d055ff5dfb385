from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.runtime.state.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from airflow_flinkchain.runtime.core.timers import InternalTimerService


class Recorder:
    def __init__(self):
        self.fired = []
        self.on_fire = None

    def on_event_time(self, timer):
        self.fired.append(("event", timer.timestamp, timer.key, timer.namespace, self.keys.current_key))
        if self.on_fire:
            self.on_fire(timer)

    def on_processing_time(self, timer):
        self.fired.append(("proc", timer.timestamp, timer.key, timer.namespace, self.keys.current_key))


def _service():
    backend = HeapKeyedStateBackend()
    rec = Recorder()
    rec.keys = backend
    return backend, InternalTimerService(backend, rec), rec


def test_timers_are_deduplicated_and_fire_in_timestamp_then_registration_order():
    b, ts, rec = _service()
    assert ts.current_watermark == MIN_WATERMARK_TS
    for key, t in (("a", 20), ("b", 10), ("a", 20), ("c", 20), ("a", 5)):
        b.set_current_key(key)
        ts.register_event_time_timer(None, t)
    assert ts.num_event_time_timers() == 4
    ts.advance_watermark(19)
    assert [(f[1], f[2]) for f in rec.fired] == [(5, "a"), (10, "b")]
    ts.advance_watermark(20)
    assert [(f[1], f[2], f[4]) for f in rec.fired[2:]] == [(20, "a", "a"), (20, "c", "c")]
    assert ts.current_watermark == 20 and ts.num_event_time_timers() == 0


def test_namespace_distinguishes_timers_and_delete_removes_one():
    b, ts, rec = _service()
    b.set_current_key("k")
    ts.register_event_time_timer("w1", 10)
    ts.register_event_time_timer("w2", 10)
    ts.delete_event_time_timer("w1", 10)
    ts.delete_event_time_timer("w1", 99)  # absent: no-op
    ts.advance_watermark(100)
    assert [f[3] for f in rec.fired] == ["w2"]


def test_a_deleted_then_re_registered_timer_fires_once():
    b, ts, rec = _service()
    b.set_current_key("k")
    ts.register_event_time_timer(None, 10)
    ts.delete_event_time_timer(None, 10)
    ts.register_event_time_timer(None, 10)
    ts.advance_watermark(10)
    assert len(rec.fired) == 1


def test_timers_registered_while_firing_at_or_below_the_watermark_fire_in_the_same_advance():
    b, ts, rec = _service()
    b.set_current_key("k")
    ts.register_event_time_timer(None, 10)
    rec.on_fire = lambda timer: timer.timestamp == 10 and (ts.register_event_time_timer(None, 15),
                                                           ts.register_event_time_timer(None, 30))
    ts.advance_watermark(20)
    assert [f[1] for f in rec.fired] == [10, 15]
    assert ts.num_event_time_timers() == 1


def test_processing_time_timers():
    b, ts, rec = _service()
    b.set_current_key("k")
    ts.register_processing_time_timer(None, 100)
    ts.register_processing_time_timer(None, 50)
    ts.advance_processing_time(60)
    assert [(f[0], f[1]) for f in rec.fired] == [("proc", 50)]
    ts.delete_processing_time_timer(None, 100)
    ts.advance_processing_time(1000)
    assert len(rec.fired) == 1


def test_quiescing_processing_time_drops_pending_timers_and_ignores_new_ones():
    b, ts, rec = _service()
    b.set_current_key("k")
    ts.register_processing_time_timer(None, 100)
    ts.register_event_time_timer(None, 7)
    assert ts.quiesce_processing_time() == 1
    ts.register_processing_time_timer(None, 200)
    ts.advance_processing_time(10**15)
    ts.advance_watermark(10)  # event time goes on
    assert [(f[0], f[1]) for f in rec.fired] == [("event", 7)]
    assert ts.num_processing_time_timers() == 0


def test_key_end_fires_event_then_processing_timers_and_ignores_registrations_meanwhile():
    b, ts, rec = _service()
    b.set_current_key("k")
    for t in (30, 10):
        ts.register_event_time_timer(None, t)
    ts.register_processing_time_timer(None, 5)
    rec.on_fire = lambda timer: (ts.register_event_time_timer(None, timer.timestamp + 1),
                                 ts.register_processing_time_timer(None, 1))
    ts.fire_all_at_key_end()
    assert [(f[0], f[1]) for f in rec.fired] == [("event", 10), ("event", 30), ("proc", 5)]
    assert ts.num_event_time_timers() == ts.num_processing_time_timers() == 0
    assert ts.current_watermark == MIN_WATERMARK_TS
    rec.on_fire = None
    ts.register_event_time_timer(None, 3)  # the next key registers again
    assert ts.num_event_time_timers() == 1


def test_snapshot_and_restore_filter_by_key_group():
    b, ts, rec = _service()
    keys = [f"k{i}" for i in range(30)]
    for i, k in enumerate(keys):
        b.set_current_key(k)
        ts.register_event_time_timer(None, 100 + i)
        ts.register_processing_time_timer("ns", 7)
    snap = ts.snapshot()
    restored = {}
    for index in range(2):
        r = compute_key_group_range_for_operator_index(128, 2, index)
        b2 = HeapKeyedStateBackend(max_parallelism=128, key_group_range=r)
        rec2 = Recorder()
        rec2.keys = b2
        ts2 = InternalTimerService(b2, rec2)
        ts2.restore([snap], r)
        ts2.advance_watermark(10_000)
        ts2.advance_processing_time(10_000)
        for kind, t, key, ns, current in rec2.fired:
            assert assign_to_key_group(key, 128) in r and current == key
            restored.setdefault(key, []).append((kind, t))
    assert restored == {k: [("event", 100 + i), ("proc", 7)] for i, k in enumerate(keys)}
