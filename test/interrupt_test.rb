# frozen_string_literal: true

require_relative "test_helper"

# An idle worker sleeps in native code with the GVL released and no timer.
# Ruby must still be able to interrupt it (Thread#raise, Thread#kill,
# Ractor teardown at exit): the unblocking function wakes the wait.
class InterruptTest < Minitest::Test
  include SolidJobsTestHelpers

  def test_a_thread_waiting_for_a_job_is_interrupted_at_once
    configure_solid_jobs(execution_mode: :thread, concurrency: 1)
    start_conductor
    waiting = Thread.new { @conductor.dispatcher.next_job(600) }
    waiting.report_on_exception = false # the raise below is the point of the test
    eventually("the thread blocks in native code") { waiting.status == "sleep" }
    waiting.raise(ArgumentError, "wake up")
    # join's bound only keeps a broken build from hanging for 600 s.
    finished = waiting.join(10)
    flunk "Thread#raise did not interrupt a native wait" unless finished
  rescue ArgumentError => e
    assert_equal "wake up", e.message
  end

  def test_stop_wakes_idle_workers_without_a_timer
    configure_solid_jobs(concurrency: 2)
    start_conductor
    eventually("both workers registered") do
      JSON.parse(@conductor.dispatcher.worker_states).count { |w| w["state"] == "waiting" } == 2
    end
    # A worker registers right before its first wait for a job: two
    # heartbeats later both are long inside that native wait.
    beats = []
    eventually("two heartbeats after the workers registered") do
      score = redis.zscore(key("node_deadlines"), @conductor.node_id)
      beats << score if score && score != beats.last
      beats.size > 2
    end
    assert @conductor.stop(timeout: 5), "idle workers stopped"
  end
end
