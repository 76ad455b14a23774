# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/active_jobs"

# ActiveJob::QueueAdapters::SolidJobsAdapter with Debian's activejob 6.1,
# against a real Redis, and real `solid-jobs` processes for execution.
class ActiveJobTest < SolidJobsTest
  APP = File.join(ROOT, "test", "support", "active_job_app.rb")

  def envelopes(channel = "default")
    redis.lrange(key("channel:#{channel}"), 0, -1).map { |raw| JSON.parse(raw) }
  end

  def spawn_worker(*args)
    log = File.join(@ledger_dir, "worker.log")
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log,
                               args: ["--require", APP, "--concurrency", "2", *args]).start
    eventually("node started") { File.exist?(log) && File.read(log).include?("started:") }
    [worker, log]
  end

  def stop(worker, log)
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(log)
  end

  # Issue 11, failure 2: `queue_adapter = :solid_jobs` raised NameError
  # when SolidJobs was loaded before Active Job (as `solid-jobs --require`
  # does), and worked only the other way round.
  def test_the_adapter_is_found_by_name_whatever_was_required_first
    ['require "solid_jobs"; require "active_job"', 'require "solid-jobs"; require "active_job"',
     'require "active_job"; require "solid_jobs"', 'require "active_job"; ActiveJob::Base; require "solid-jobs"'].each do |order|
      script = "#{order}; " \
               "ActiveJob::Base.queue_adapter = :solid_jobs; print ActiveJob::Base.queue_adapter.class.name; " \
               "ActiveJob::Base.queue_adapter = :inline; print ' ', ActiveJob::Base.queue_adapter.class.name"
      out, err, status = SolidJobsCommand.ruby3({}, "-e", script)
      assert status.success?, "#{order}: #{err}"
      assert_equal "ActiveJob::QueueAdapters::SolidJobsAdapter ActiveJob::QueueAdapters::InlineAdapter", out, order
    end
  end

  def test_the_adapter_is_found_by_name
    assert_instance_of ActiveJob::QueueAdapters::SolidJobsAdapter, ActiveJob::Base.queue_adapter
    assert_equal "SolidJobs::ActiveJobWrapper", SolidJobs::Lanes.thread_task_names.find { |n| n.include?("ActiveJob") }
  end

  def test_perform_later_writes_one_solid_jobs_envelope_and_nothing_else
    before = redis.keys("*")
    job = LedgerJob.perform_later("/tmp/ledger", "one")
    # Earlier tests' namespaces (t + 8 hex digits) may still receive a
    # telemetry flush from their clients' background threads meanwhile:
    # not this call's writes.
    written = (redis.keys("*") - before).reject { |k| k.match?(/\At\h{8}:/) && !k.start_with?("#{@namespace}:") }
    assert written.all? { |k| k.start_with?("#{@namespace}:") }, "only SolidJobs keys: #{written.inspect}"
    refute_empty written, "the job was written under this test's namespace"
    envelope = envelopes.fetch(0)
    assert_equal "SolidJobs::ActiveJobWrapper", envelope["task"]
    assert_equal "default", envelope["channel"]
    assert_equal 1, envelope["max_failures"]
    data = envelope["arguments"].fetch(0)
    assert_equal %w[LedgerJob default], data.values_at("job_class", "queue_name")
    assert_equal ["/tmp/ledger", "one"], data["arguments"]
    assert_equal job.job_id, data["job_id"]
    assert_equal envelope["id"], job.provider_job_id
  end

  def test_queue_as_is_the_channel
    MailerLedgerJob.perform_later("/tmp/ledger", "mail")
    LedgerJob.set(queue: "reports").perform_later("/tmp/ledger", "report")
    assert_equal ["mailers"], envelopes("mailers").map { |e| e["channel"] }
    assert_equal ["reports"], envelopes("reports").map { |e| e["channel"] }
    assert_raises(ArgumentError) { LedgerJob.set(queue: "not a channel").perform_later("/tmp/ledger", "x") }
  end

  def test_set_wait_and_wait_until_schedule_solid_jobs_jobs
    now_ms = SolidJobs::Clock.now_ms
    LedgerJob.set(wait: 600).perform_later("/tmp/ledger", "later")
    at = Time.at(Time.now.to_i + 3_600)
    LedgerJob.set(wait_until: at).perform_later("/tmp/ledger", "at")
    assert_empty envelopes
    scores = redis.zrange(key("planned"), 0, -1, with_scores: true).map(&:last)
    assert_equal 2, scores.size
    assert_operator scores.min, :>=, now_ms + 590_000
    # A due time becomes a delay on the node's clock and is planned on
    # Redis' clock; each reads whole milliseconds, so on one host the two
    # may differ by one.
    assert_in_delta at.to_i * 1000, scores.max, 2
  end

  # Active Job's priority (lower runs first) maps monotonically onto
  # SolidJobs' 0..9 (docs/flow-control.md, "Priorities"); nil and 0 are 5.
  def test_priority_maps_onto_levels_in_order
    table = {nil => 5, -1000 => 0, -100 => 0, -99 => 1, -50 => 1, -20 => 2, -10 => 3, -1 => 4, 0 => 5,
             1 => 6, 9 => 6, 10 => 7, 19 => 7, 20 => 8, 49 => 8, 50 => 9, 10_000 => 9}
    table.each { |p, level| assert_equal level, SolidJobs::ActiveJob.priority_for(p), p.inspect }
    LedgerJob.set(priority: 10).perform_later("/tmp/ledger", "p10")
    LedgerJob.perform_later("/tmp/ledger", "plain")
    assert_equal ["p10"], envelopes("default:7").map { |e| e["arguments"][0]["arguments"][1] }
    assert_equal({"priority" => 7}, envelopes("default:7")[0]["meta"])
    assert_equal ["plain"], envelopes.map { |e| e["arguments"][0]["arguments"][1] }

    SolidJobs.config.active_job_priority = ->(p) { p.nil? ? 5 : 9 - p }
    LedgerJob.set(priority: 9).perform_later("/tmp/ledger", "mapped")
    assert_equal 1, envelopes("default:0").size
    SolidJobs.config.active_job_priority = ->(_) { 12 }
    assert_raises(SolidJobs::ConfigurationError) { LedgerJob.set(priority: 1).perform_later("/tmp/ledger", "x") }
  ensure
    SolidJobs.config.active_job_priority = nil
  end

  # Rails' own adapter test (priority 20 and 10 due at the same
  # `wait_until`) ran them in the wrong order 3 times out of 8: here 8
  # rounds on a real worker with one thread (the ledger is in completion
  # order, so one thread makes it the start order), each pair due together.
  def test_jobs_due_together_run_by_priority
    worker, log = spawn_worker("--concurrency", "1", "--thread-concurrency", "1")
    path = ledger_path
    # Round 0 starts while the worker boots: CI once ran it p20 first (a
    # thread worker took the later job from the claim while a Ractor worker
    # was handing the earlier one over; crates/solid_core/src/hub.rs now
    # keeps the lanes in claim order).
    # A round tells the order only if both jobs were written before they
    # were due: on a loaded host the test can be descheduled past `at`
    # between the two calls, and p20 is then promoted and run alone.
    in_time = Array.new(8) do |round|
      at = Time.now + 0.5
      LedgerJob.set(wait_until: at, priority: 20).perform_later(path, "p20-#{round}")
      LedgerJob.set(wait_until: at, priority: 10).perform_later(path, "p10-#{round}")
      written = Time.now < at
      eventually("round #{round} ran") { ledger_lines.size == 2 * (round + 1) }
      written
    end
    ran = ledger_lines.map { |l| l.split.first }.each_slice(2).to_a
    rounds = (0...8).select { |r| in_time[r] }
    refute_empty rounds, "no round had both jobs written before they were due"
    assert_equal(rounds.map { |r| ["p10-#{r}", "p20-#{r}"] }, rounds.map { |r| ran[r] })
  ensure
    stop(worker, log) if worker
  end

  def test_enqueue_all_writes_each_group_at_once_and_sets_provider_ids
    jobs = [LedgerJob.new("/tmp/ledger", "a"), LedgerJob.new("/tmp/ledger", "b"), MailerLedgerJob.new("/tmp/ledger", "c"),
            LedgerJob.new("/tmp/ledger", "d").tap { |j| j.scheduled_at = Time.now.to_f + 600 }]
    assert_equal 4, SolidJobs::ActiveJob.enqueue_all(jobs)
    assert_equal 2, envelopes.size
    assert_equal 1, envelopes("mailers").size
    assert_equal 1, redis.zcard(key("planned"))
    assert jobs.all?(&:provider_job_id)
    assert_equal 4, jobs.map(&:provider_job_id).uniq.size
  end

  def test_the_adapter_enqueue_all_is_perform_all_laters_one_round_trip
    adapter = ActiveJob::Base.queue_adapter
    jobs = Array.new(3) { |i| LedgerJob.new("/tmp/ledger", "all-#{i}") }
    assert_equal 3, adapter.enqueue_all(jobs)
    assert_equal jobs.map(&:provider_job_id).sort, envelopes.map { |e| e["id"] }.sort
    if jobs.first.respond_to?(:successfully_enqueued?)
      assert jobs.all?(&:successfully_enqueued?), "Rails 7.1+ reads it after perform_all_later"
    end
    # Rails 7.2 defers perform_later inside a transaction to its commit
    # when the adapter says so (enqueue_after_transaction_commit :default).
    assert_equal true, adapter.enqueue_after_transaction_commit?
  end

  def test_stopping_is_answered_and_perform_sees_the_provider_job_id
    path = ledger_path
    assert_equal false, ActiveJob::Base.queue_adapter.stopping?, "outside a worker"
    worker, log = spawn_worker("--channel", "default")
    job = StoppableJob.perform_later(path, "s")
    eventually("the job started") { ledger_lines.any? { |l| l.start_with?("started ") } }
    assert_equal "started s #{job.provider_job_id} false", ledger_lines.first
    stop(worker, log)
    assert_equal "stopping s true", ledger_lines.last, "the job saw the shutdown and returned in time"
    assert_equal 0, claims_count
    assert_equal 0, redis.llen(key("channel:default")), "it finished: nothing requeued"
  ensure
    worker&.kill!
  end

  def test_testing_modes_capture_and_execute_active_job_jobs
    path = ledger_path
    captured = SolidJobs.testing!(:capture) do
      LedgerJob.perform_later(path, "captured")
      SolidJobs::ActiveJobWrapper.captured
    end
    assert_equal "LedgerJob", captured.fetch(0)["arguments"][0]["job_class"]
    SolidJobs.testing!(:execute) { LedgerJob.perform_later(path, "inline") }
    assert_match(/\Ainline /, ledger_lines.fetch(0))
  end

  def test_a_worker_process_runs_active_job_on_threads_and_tasks_in_ractors
    path = ledger_path
    worker, log = spawn_worker("--channel", "default", "--channel", "mailers")
    assert_match(/5 thread worker\(s\) for SolidJobs::ActiveJobWrapper/, File.read(log),
                 "sized by default when Active Job is loaded")
    5.times { |i| LedgerJob.perform_later(path, "aj-#{i}") }
    2.times { |i| MailerLedgerJob.perform_later(path, "mail-#{i}") }
    LedgerJob.set(wait: 0.2).perform_later(path, "scheduled")
    CpuTask.enqueue_many(Array.new(4) { |i| [path, "cpu-#{i}", 20_000] })
    eventually("12 jobs ran") { ledger_lines.size == 12 }
    stop(worker, log)
    by_label = ledger_lines.to_h { |l| l.split.first(2) }
    active_job = by_label.reject { |label, _| label.start_with?("cpu-") }
    assert_equal 8, active_job.size
    assert active_job.values.all? { |w| w.start_with?("solid-jobs-thread-worker-") }, active_job.inspect
    assert by_label.any? { |label, w| label.start_with?("cpu-") && w.match?(/\Asolid-jobs-worker-\d+\z/) }, by_label.inspect
    assert_equal 0, SolidJobs::Archive.size
    assert_equal 0, claims_count
  end

  def test_retry_on_discard_on_and_escaping_errors_with_a_real_worker
    path = ledger_path
    worker, log = spawn_worker
    FlakyJob.perform_later(path, "recovers", 1)     # fails once, retry_on re-enqueues, succeeds
    FlakyJob.perform_later(path, "exhausted", 99)   # retry_on's 3 attempts, then it escapes
    DiscardedJob.perform_later(path, "discarded")   # discard_on: done
    BrokenJob.perform_later(path, "broken")         # no handler: escapes at once
    eventually("settled") do
      ledger_lines.include?("done recovers") && SolidJobs::Archive.size == 2 && ledger_lines.include?("attempt discarded")
    end
    stop(worker, log)

    assert_equal ["attempt recovers 1", "attempt recovers 2", "done recovers"], ledger_lines.grep(/recovers/)
    assert_equal ["attempt exhausted 1", "attempt exhausted 2", "attempt exhausted 3"], ledger_lines.grep(/exhausted/),
                 "Active Job's attempts only: SolidJobs did not retry on top"
    assert_equal ["attempt discarded"], ledger_lines.grep(/discarded/)
    assert_equal ["attempt broken"], ledger_lines.grep(/broken/)
    archived = SolidJobs::Archive.list(limit: 10).to_h { |r| [r["envelope"]["arguments"][0]["job_class"], r] }
    assert_equal %w[BrokenJob FlakyJob], archived.keys.sort
    assert_equal "FlakyJob::Flake", archived["FlakyJob"]["error_class"]
    assert_equal 3, archived["FlakyJob"]["envelope"]["arguments"][0]["executions"] + 1, "archived at its third execution"
    assert_equal "ArgumentError", archived["BrokenJob"]["error_class"]
    assert archived.values.all? { |r| r["task"] == "SolidJobs::ActiveJobWrapper" && r["reason"].include?("max_failures 1") }
    assert_equal 0, redis.zcard(key("retrying")), "no SolidJobs retry was scheduled"
    assert_equal 0, redis.zcard(key("planned"))
    assert_equal 0, claims_count
  end

  # Producers deployed a new job class first: the worker does not define it
  # yet, so the job waits like an unknown task (not archived by the
  # wrapper's max_failures 1), and a NameError inside a job's own code is
  # still an ordinary failure.
  def test_an_active_job_class_the_worker_does_not_define_waits_for_the_deploy
    data = LedgerJob.new(ledger_path, "not-deployed").serialize.merge("job_class" => "NotDeployedYetJob")
    id = SolidJobs::Publisher.publish(SolidJobs::ActiveJobWrapper, [[data]]).first
    worker, log = spawn_worker
    eventually("retried as an unknown task") { redis.hget(key("attempts"), id)&.then { |r| JSON.parse(r)["unknown"].to_i >= 1 } }
    record = JSON.parse(redis.hget(key("attempts"), id))
    assert_equal "SolidJobs::UnknownTaskError", record["error_class"]
    assert_match(/unknown Active Job class NotDeployedYetJob/, record["message"])
    assert_equal 1, redis.zcard(key("retrying"))
    assert_equal 0, SolidJobs::Archive.size, "not archived at once"
    stop(worker, log)
  end
end
