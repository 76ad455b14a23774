# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# `solid-jobs` as a real process.
class CLITest < SolidJobsTest
  def run_cli(*args)
    SolidJobsCommand.capture3({"SOLID_JOBS_TEST_NAMESPACE" => @namespace}, *args)
  end

  def spawn_worker(*args)
    log = File.join(@ledger_dir, "worker.log")
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: args).start
    [worker, log]
  end

  def test_help_and_version
    out, _, status = run_cli("--help")
    assert status.success?
    assert_match(/Usage: solid-jobs/, out)
    assert_match(/--channel NAME\[,WEIGHT\]/, out)
    out, _, status = run_cli("--version")
    assert status.success?
    assert_equal "solid-jobs #{SolidJobs::VERSION}\n", out
  end

  def test_bad_flags_exit_non_zero_with_a_message
    {
      %w[--queue default] => /--queue is not an option.*use --channel/,
      %w[--concurrency many] => /invalid argument: --concurrency many/,
      %w[--concurrency 0] => /invalid concurrency 0/,
      %w[--channel a,zero] => /invalid channel "a,zero"/,
      %w[--execution-mode fork] => /invalid execution_mode "fork"/,
      %w[--bogus] => /invalid option: --bogus/,
      %w[--require ./no/such/file] => /no such file/,
      %w[extra] => /unexpected argument/
    }.each do |args, pattern|
      out, err, status = run_cli(*args)
      assert_equal 64, status.exitstatus, "#{args.join(" ")}: #{err}"
      assert_match pattern, err, args.join(" ")
      assert_empty out
    end
  end

  # Issue 11, failure 3: the job server had to be built with rake from a
  # checkout; `solid-jobs engine` runs the binary that comes with the gem.
  def test_solid_jobs_engine_serves_jobs_and_stops_on_term
    dir = Dir.mktmpdir("sje") # short: Unix socket paths are limited to about 100 bytes
    url = "unix://#{File.join(dir, "engine.sock")}"
    log = File.join(@ledger_dir, "engine.log")
    engine = SolidJobsCommand.spawn({}, "engine", "--listen", url, "--durability", "memory", out: [log, "a"], err: [log, "a"])
    configure_solid_jobs(backend: :solid_engine, url: url, backends: {solid_engine: {adapter: :solid_engine, url: url}})
    path = ledger_path
    eventually("the engine accepts jobs") do
      CpuTask.enqueue(path, "engine-0", 1_000)
    rescue StandardError
      nil
    end
    CpuTask.enqueue_many(Array.new(9) { |i| [path, "engine-#{i + 1}", 1_000] })
    # Redis is never touched: a closed port proves the jobs came from the engine.
    worker = WorkerProcess.new(redis_url: "redis://127.0.0.1:#{RedisServer.closed_port}/0", namespace: @namespace,
                               log: File.join(@ledger_dir, "worker.log"), args: %w[--concurrency 1],
                               env: {"SOLID_JOBS_TEST_ENGINE_URL" => url}).start
    eventually("10 jobs ran") { ledger_lines.size == 10 }
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(worker.log)
    Process.kill("TERM", engine)
    _, status = Process.wait2(engine)
    assert_equal 0, status.exitstatus, File.read(log)
    engine = nil
  ensure
    if engine
      Process.kill("KILL", engine)
      Process.wait(engine)
    end
    FileUtils.rm_rf(dir) if dir
  end

  def test_solid_jobs_engine_passes_its_arguments_to_the_server
    out, err, status = run_cli("engine", "--version")
    assert status.success?, err
    assert_equal "solid-engine-server #{SolidJobs::VERSION}\n", out
    out, = run_cli("--help")
    assert_match(/solid-jobs engine \[options\]/, out)
    assert_match(/solid-jobs warm ID/, out)
  end

  def test_runs_jobs_and_stops_gracefully_on_term
    path = ledger_path
    CpuTask.enqueue_many(Array.new(30) { |i| [path, "cli-#{i}", 100_000] })
    worker, log = spawn_worker("--concurrency", "2", "--channel", "default")
    eventually("30 jobs ran") { ledger_lines.size == 30 }
    worker.signal("TERM")
    status = worker.wait
    assert_equal 0, status.exitstatus, File.read(log)
    assert_equal [worker.pid.to_s], ledger_lines.map { |l| l.split[2] }.uniq
    assert_operator ledger_lines.map { |l| l.split[1] }.uniq.size, :>=, 1
    assert_equal 0, claims_count
    assert_empty redis.smembers(key("nodes")), "node deregistered"
    assert_match(/started: 2 ractor worker\(s\), channels default\(1\)/, File.read(log))
  end

  def test_int_lets_the_running_task_finish
    path = ledger_path
    worker, log = spawn_worker("--concurrency", "1", "--shutdown-timeout", "10")
    SlowTask.enqueue(path, "slow", 1.0)
    eventually("task started") { ledger_lines.include?("start slow") }
    worker.signal("INT")
    status = worker.wait
    assert_equal 0, status.exitstatus, File.read(log)
    assert_equal "slow", ledger_lines.last.split.first, "the running task finished before exit"
    assert_equal 0, redis.llen(key("channel:default"))
    assert_equal 0, claims_count
  end

  def test_a_worker_started_while_redis_is_down_waits_for_it
    down = RedisServer.new
    worker = WorkerProcess.new(redis_url: down.url, namespace: @namespace, log: File.join(@ledger_dir, "w.log"),
                               args: %w[--concurrency 1]).start
    eventually("waiting for Redis") { File.read(worker.log).include?("waiting for Redis") }
    down.start
    eventually("started once Redis is up") { File.read(worker.log).include?("started: 1 ractor worker") }
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(worker.log)
  ensure
    down&.cleanup
  end

  def test_term_while_waiting_for_redis_exits_cleanly
    worker = WorkerProcess.new(redis_url: "redis://127.0.0.1:#{RedisServer.closed_port}/0", namespace: @namespace,
                               log: File.join(@ledger_dir, "w.log"), args: %w[--concurrency 1]).start
    eventually("waiting for Redis") { File.read(worker.log).include?("waiting for Redis") }
    worker.signal("TERM")
    assert_equal 0, worker.wait(timeout: 10).exitstatus
  end

  def test_second_signal_requeues_the_running_task_and_exits_at_once
    path = ledger_path
    worker, log = spawn_worker("--concurrency", "1", "--shutdown-timeout", "30")
    SlowTask.enqueue(path, "very-slow", 20)
    eventually("task started") { ledger_lines.include?("start very-slow") }
    worker.signal("TERM")
    eventually("first signal seen") { File.read(log).include?("stopping") }
    worker.signal("TERM")
    status = worker.wait(timeout: 10)
    assert_equal 0, status.exitstatus, File.read(log)
    assert_equal 1, redis.llen(key("channel:default")), "the running task was requeued"
    assert_equal 0, claims_count
  end
end
