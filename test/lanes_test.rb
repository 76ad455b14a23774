# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/thread_tasks"

# Mixed nodes: worker Ractors for ordinary tasks and thread workers for
# tasks that cannot run in a Ractor, on one dispatcher (SolidJobs::Lanes).
class LanesTest < SolidJobsTest
  LANES_APP = File.join(ROOT, "test", "support", "lanes_app.rb")

  def test_thread_worker_count
    config = SolidJobs::Configuration.new
    assert_equal 0, SolidJobs::Lanes.thread_workers(config, []), "no thread tasks, no Rails: Ractors only"
    assert_equal 0, SolidJobs::Lanes.thread_workers(config, ["SolidJobsGenericExecutor"]),
                 "the built-in executor alone asks for none"
    assert_equal 5, SolidJobs::Lanes.thread_workers(config, ["ThreadOnlyTask"])
    config.thread_concurrency = 2
    assert_equal 2, SolidJobs::Lanes.thread_workers(config, [])
    config.execution_mode = :thread
    assert_equal 0, SolidJobs::Lanes.thread_workers(config, ["ThreadOnlyTask"]), "in :thread mode every worker is a thread"
  end

  def test_thread_tasks_are_found_with_their_subclasses
    names = SolidJobs::Lanes.thread_task_names
    assert_includes names, "ThreadOnlyTask"
    assert_includes names, "ThreadOnlySubTask"
    refute_includes names, "LedgerTask"
  end

  def test_execution_option_and_thread_concurrency_are_validated
    assert_raises(SolidJobs::ConfigurationError) { Class.new { include SolidJobs::Task }.task_options(execution: :fork) }
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.config.thread_concurrency = -1 }
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.config.thread_concurrency = "5" }
  end

  def test_a_mixed_node_runs_thread_tasks_on_threads_and_the_rest_in_ractors
    path = ledger_path
    ThreadOnlyTask.enqueue_many(Array.new(20) { |i| [path, "thread-#{i}"] })
    ThreadOnlySubTask.enqueue_many(Array.new(5) { |i| [path, "sub-#{i}"] })
    CpuTask.enqueue_many(Array.new(20) { |i| [path, "cpu-#{i}", 20_000] })
    configure_solid_jobs(concurrency: 2, thread_concurrency: 2)
    start_conductor
    eventually("45 jobs ran") { ledger_lines.size == 45 }
    by_label = ledger_lines.to_h { |l| l.split.first(2) }
    thread_tasks = by_label.select { |label, _| label.start_with?("thread-", "sub-") }
    assert_equal 25, thread_tasks.size
    assert thread_tasks.values.all? { |w| w.start_with?("solid-jobs-thread-worker-") }, thread_tasks.inspect
    assert by_label.any? { |label, w| label.start_with?("cpu-") && w.match?(/\Asolid-jobs-worker-\d+\z/) },
           "ordinary tasks keep their Ractors"
    eventually("completions written") { claims_count.zero? }
    assert_equal 0, redis.hlen(key("attempts")), "nothing failed"
  end

  def test_a_thread_task_defined_after_start_is_handed_over_by_the_ractor_worker
    path = ledger_path
    configure_solid_jobs(concurrency: 1, thread_concurrency: 1)
    start_conductor
    late = Class.new(ThreadOnlyTask) { @lock = Mutex.new }
    Object.const_set(:LateThreadTask, late)
    LateThreadTask.enqueue_many(Array.new(5) { |i| [path, "late-#{i}"] })
    eventually("5 jobs ran") { ledger_lines.size == 5 }
    assert ledger_lines.all? { |l| l.split[1].start_with?("solid-jobs-thread-worker-") }, ledger_lines.inspect
    assert_equal 0, redis.hlen(key("attempts"))
  ensure
    Object.send(:remove_const, :LateThreadTask) if Object.const_defined?(:LateThreadTask)
  end

  def test_a_worker_process_requeues_handed_over_jobs_at_shutdown_and_runs_each_once
    path = ledger_path
    log = File.join(@ledger_dir, "worker.log")
    args = ["--require", LANES_APP, "--concurrency", "1", "--thread-concurrency", "1", "--shutdown-timeout", "10"]
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: args).start
    eventually("node started") { File.read(log).match?(/1 thread worker\(s\) for .*ThreadOnlySubTask, ThreadOnlyTask/) }
    # One runs on the thread worker, one waits in the thread lane, one is
    # held by the Ractor worker waiting for room, the rest stay buffered.
    ThreadOnlyTask.enqueue_many(Array.new(5) { |i| [path, "slow-#{i}", 1.0] })
    LedgerTask.enqueue(path, "plain")
    eventually("a slow job started and the plain one ran") do
      ledger_lines.any? { |l| l.start_with?("start slow-") } && ledger_lines.any? { |l| l.start_with?("plain ") }
    end
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(log)
    assert_match(/stopped: [1-9]\d* job\(s\) requeued/, File.read(log))
    finished = ledger_lines.grep(/\Aslow-\d+ /).map { |l| l.split.first }
    refute_empty finished, "the running job finished within the shutdown timeout"
    assert_equal 0, claims_count, "nothing left claimed"
    assert_equal 5 - finished.size, redis.llen(key("channel:default")), "every unfinished job was requeued"

    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: args).start
    eventually("the rest ran") { ledger_lines.grep(/\Aslow-\d+ /).size >= 5 }
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(log)
    done = ledger_lines.grep(/\Aslow-\d+ /).map { |l| l.split.first }
    assert_equal (0...5).map { |i| "slow-#{i}" }.sort, done.sort, "each slow job completed exactly once"
    assert ledger_lines.grep(/\Aslow-\d+ /).all? { |l| l.split[1].start_with?("solid-jobs-thread-worker-") }, ledger_lines.inspect
    assert_equal 0, claims_count
  end
end
