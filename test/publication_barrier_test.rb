# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/recording_instrumenter"
require "rbconfig"

# With a custom instrumenter, publications wait behind an expiring barrier
# until job.enqueued and job.journaled are emitted. A publisher killed
# behind it does not strand its job: the barrier expires and a node's
# heartbeat releases it.
class PublicationBarrierTest < SolidJobsTest
  PUBLISHER = File.expand_path("support/held_publisher.rb", __dir__)

  def test_a_sigkilled_publisher_does_not_strand_its_job
    events = ledger_path("events")
    pid = Process.spawn(RbConfig.ruby, PUBLISHER, REDIS.url, @namespace, events, ledger_path,
                        out: File::NULL, err: File.join(@ledger_dir, "publisher.log"))
    journaled = eventually("the publisher is emitting job.journaled") do
      RecordingInstrumenter.events(events).find { |name, _| name == "job.journaled" }
    end
    id = journaled.last["job_id"]
    assert_equal 1, redis.zcard(key("publishing")), "held"
    assert_equal 0, redis.llen(key("channel:default")), "not reservable yet"
    Process.kill("KILL", pid)
    Process.wait(pid)

    start_conductor
    eventually("the barrier expired and a heartbeat released the job; it ran") do
      ledger_lines.any? { |l| l.start_with?("held ") }
    end
    assert_equal 0, redis.zcard(key("publishing"))
    assert_nil SolidJobs.client.job_state(id), "completed"
  end

  def test_the_integrity_check_reports_a_barrier_nobody_released
    configure_solid_jobs(instrumenter: RecordingInstrumenter.new(ledger_path("events")))
    envelope = SolidJobs::Native::Client.build("LedgerTask", [ledger_path, "stuck"], "default", 3, nil)
    redis.zadd(key("publishing"), SolidJobs::Clock.now_ms - 60_000, "0|default|#{JSON.generate(envelope)}")
    report = SolidJobs::IntegrityCheck.run
    refute report.ok?
    assert_equal 1, report.counts[:publishing]
    assert_equal [envelope["id"]], report.expired_publications.map { |p| p[:id] }
  end

  def test_without_an_instrumenter_there_is_no_barrier
    LedgerTask.enqueue(ledger_path, "plain")
    assert_equal 1, redis.llen(key("channel:default"))
    refute redis.exists?(key("publishing"))
  end

  def test_scheduled_jobs_pass_the_barrier_into_planned
    configure_solid_jobs(instrumenter: RecordingInstrumenter.new(ledger_path("events")))
    id = LedgerTask.enqueue_after(60, ledger_path, "later")
    assert_equal 0, redis.zcard(key("publishing"))
    assert_equal 1, redis.zcard(key("planned"))
    assert_equal "planned", SolidJobs.client.job_state(id).first
  end
end
