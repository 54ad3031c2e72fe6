"""StageTimes: stage seconds and work tallies from several threads, merged when read."""

import threading

from gblastn.timing import StageTimes


def test_tallies_of_threads_add_up_and_are_reported():
    times = StageTimes()

    def work():
        times.count("gpu dp cells", 1000)
        times.add("scan", 0.5)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    times.count("gpu dp extensions", 7)
    assert times.tallies == {"gpu dp cells": 3000, "gpu dp extensions": 7}
    assert times.seconds["scan"] == 1.5
    assert times.report().splitlines()[1] == "work done: gpu dp cells 3000, gpu dp extensions 7"


def test_a_search_without_tallies_reports_one_line():
    times = StageTimes()
    times.add("scan", 0.25)
    assert "\n" not in times.report()
