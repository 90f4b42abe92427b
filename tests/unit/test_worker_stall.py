"""A worker's task window seen as stalled: full of deliveries while no task runs."""

from __future__ import annotations

from kombu.transport import virtual

from crawlfleet.runtime.celery.health import window_stalled


class _Channel:
    """What ``virtual.QoS`` needs of its channel to count deliveries (nothing is sent)."""

    do_restore = False  # at collection, restore nothing


def test_a_full_window_with_no_task_running_is_stalled() -> None:
    qos = virtual.QoS(_Channel(), prefetch_count=1)
    assert not window_stalled(qos, running=0)
    qos.append(object(), "tag-1")
    assert window_stalled(qos, running=0)
    assert not window_stalled(qos, running=1)  # the delivery is the task that runs
    qos.ack("tag-1")
    assert not window_stalled(qos, running=0)
