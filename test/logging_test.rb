# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/active_jobs"
require_relative "support/logging_tasks"

# A task the workers started with test/support/logging_app.rb do not define.
class NotOnTheWorkerTask
  include SolidJobs::Task
  def execute_task(*) = nil
end

# Log lines as operators read and ship them: real `bundle exec solid-jobs`
# processes, every line of their output parsed (docs/operations.md, "Logs").
class LoggingTest < SolidJobsTest
  APP = File.join(ROOT, "test", "support", "logging_app.rb")
  TS = /\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\z/
  UUID = /\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/

  def spawn_worker(*args, env: {}, name: "worker")
    log = File.join(@ledger_dir, "#{name}.log")
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, env: env,
                               args: ["--require", APP, "--concurrency", "2", *args]).start
    # Registered in Redis: whatever its level or logger, the node is up.
    eventually("node started") { worker.node_id(redis) }
    worker
  end

  def stop(worker)
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(worker.log)
  end

  def json_lines(path)
    File.readlines(path, chomp: true).each_with_index.map do |line, i|
      JSON.parse(line)
    rescue JSON::ParserError => e
      flunk("line #{i + 1} of #{path} is not JSON (#{e.message}): #{line.inspect}")
    end
  end

  def test_a_worker_writes_every_line_as_json_with_ids_levels_and_durations
    path = ledger_path
    worker = spawn_worker("--log-format", "json", "--log-level", "debug",
                          env: {"SOLID_JOBS_LOG_LEVEL" => "warn", "SOLID_JOBS_TEST_SAMPLE_RATE" => "0"})
    ok = LedgerTask.enqueue(path, "ok")
    retried = RetriedOnceTask.enqueue(path, "flaky")
    given_up = GivenUpTask.enqueue(path, "doomed")
    unknown = NotOnTheWorkerTask.enqueue
    active = LedgerJob.perform_later(path, "aj").provider_job_id
    eventually("every job settled") do
      lines = ledger_lines
      %w[ok done\ flaky aj].all? { |l| lines.any? { |x| x.start_with?(l) } } && redis.zcard(key("archive")) >= 1 &&
        File.read(worker.log).include?(unknown)
    end
    stop(worker)

    lines = json_lines(worker.log)
    node = lines.find { |l| l["event"] == "node.started" }&.fetch("node_id")
    assert_match UUID, node
    lines.each do |l|
      assert_match TS, l["ts"], l.inspect
      assert_includes %w[DEBUG INFO WARN ERROR], l["level"], l.inspect
      assert_equal worker.pid, l["pid"], l.inspect
      assert_kind_of String, l["msg"], l.inspect
      assert_equal node, l["node_id"], "every line of a node names it: #{l.inspect}"
    end
    by_job = lines.group_by { |l| l["job_id"] }

    ok_lines = by_job.fetch(ok)
    assert_equal %w[job.started job.completed], ok_lines.map { |l| l["event"] }
    assert(ok_lines.all? { |l| l["level"] == "DEBUG" && l["task"] == "LedgerTask" && l["channel"] == "default" })
    assert(ok_lines.all? { |l| l["worker_id"].is_a?(Integer) && l["worker_id"].positive? })
    finished = ok_lines.last
    assert_kind_of Numeric, finished["duration_ms"]
    assert_operator finished["duration_ms"], :>=, 0
    assert_kind_of Integer, ok_lines.first["latency_ms"]

    failed = by_job.fetch(retried).find { |l| l["event"] == "job.failed" }
    assert_equal "INFO", failed["level"]
    assert_equal ["RetriedOnceTask", "ArgumentError", 1, 3, 0.2],
                 failed.values_at("task", "error_class", "failures", "max_failures", "retry_in_s")
    assert_match(%r{failure 1/3, retry in 0\.2s}, failed["msg"])
    assert_equal %w[job.started job.failed job.started job.completed], by_job.fetch(retried).map { |l| l["event"] }

    dead = by_job.fetch(given_up).find { |l| l["event"] == "job.dead" }
    assert_equal ["INFO", "GivenUpTask", "archived", "KeyError", 1],
                 dead.values_at("level", "task", "reason", "error_class", "failures")

    postponed = by_job.fetch(unknown).find { |l| l["event"] == "job.unknown_task" }
    assert_equal ["INFO", "NotOnTheWorkerTask", "SolidJobs::UnknownTaskError"],
                 postponed.values_at("level", "task", "error_class")
    assert_kind_of Numeric, postponed["retry_in_s"]

    aj = by_job.fetch(active)
    assert_equal %w[job.started job.completed], aj.map { |l| l["event"] }
    assert(aj.all? { |l| l["task"] == "LedgerJob" }, "logged under the job class, not the wrapper: #{aj.inspect}")
    refute_includes File.read(worker.log), "SolidJobs::ActiveJobWrapper #{active}"
    refute_includes File.read(worker.log), path, "no argument is logged"

    stopped = lines.find { |l| l["event"] == "node.stopped" }
    assert_equal ["INFO", 0], stopped.values_at("level", "requeued")
  end

  def test_text_lines_name_time_level_pid_and_ids
    path = ledger_path
    worker = spawn_worker("--log-level", "debug", env: {"SOLID_JOBS_LOG_FORMAT" => "text"})
    id = LedgerTask.enqueue(path, "ok")
    eventually("finished") { File.read(worker.log).include?("job=#{id} channel=default finished") }
    stop(worker)
    log = File.read(worker.log)
    ts = '\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z'
    assert_match(/^#{ts} INFO pid=#{worker.pid} node=\S+ node \S+ started: 2 ractor worker\(s\)/, log)
    finished = "DEBUG pid=#{worker.pid} node=\\S+ worker=\\d+ task=LedgerTask job=#{id} channel=default finished " \
               "event=job.completed duration_ms=[\\d.]+$"
    assert_match(/^#{ts} #{finished}/, log)
    log.each_line { |line| assert_match(/\A#{ts} (DEBUG|INFO|WARN|ERROR) pid=#{worker.pid} /, line) }
  end

  def test_the_level_flag_filters_and_wins_over_the_environment
    path = ledger_path
    worker = spawn_worker("--log-level", "warn", "--log-format", "json", env: {"SOLID_JOBS_LOG_LEVEL" => "debug"})
    RetriedOnceTask.enqueue(path, "flaky")
    eventually("retried") { ledger_lines.include?("done flaky") }
    stop(worker)
    log = File.read(worker.log)
    refute_match(/"level":"(DEBUG|INFO)"/, log)
    refute_includes log, "job.failed", "a retry is an info line"
  end

  def test_a_bad_flag_value_exits_64_naming_the_flag
    _, err, status = SolidJobsCommand.capture3({}, "--log-format", "xml")
    assert_equal 64, status.exitstatus
    assert_match(/--log-format "xml": expected one of text, json/, err)
    _, err, status = SolidJobsCommand.capture3({}, "--log-level", "loud")
    assert_equal 64, status.exitstatus
    assert_match(/--log-level "loud": expected one of debug, info, warn, error, none/, err)
  end

  # config.logger from the app: lines of the worker Ractors and of the
  # native threads reach the one Logger through the main Ractor.
  def test_a_configured_logger_receives_the_lines_of_ractor_workers
    path = ledger_path
    logger_file = File.join(@ledger_dir, "app.log")
    worker = spawn_worker("--log-level", "debug", env: {"SOLID_JOBS_TEST_LOGGER" => logger_file})
    # CPU jobs first (a few ms each): while one Ractor runs one, the other
    # takes the next, so both log whatever the Ruby's Ractor speed (on 3.4
    # one Ractor could run all twenty quick jobs alone).
    10.times { |i| CpuTask.enqueue(path, "cpu-#{i}") }
    ids = Array.new(20) { |i| LedgerTask.enqueue(path, "job-#{i}") }
    eventually("all ran") { ledger_lines.size == 30 }
    stop(worker)
    routed = File.read(logger_file)
    ids.each do |id|
      assert_match(/D,\ \[.*\]\ DEBUG\ --\ :\ \S+\ DEBUG\ pid=#{worker.pid}\ node=\S+\ worker=\d+\ task=LedgerTask\ job=#{id}
                    \ channel=default\ finished\ event=job.completed\ duration_ms=/x, routed)
    end
    assert_match(/I, \[.*\]  INFO -- : .* node \S+ stopped: 0 job\(s\) requeued/, routed, "lines at exit are flushed")
    # Workers 1 and 2 are the Ractors (a thread worker may take a job too).
    workers = routed.scan(/ worker=(\d+) task=/).flatten.uniq
    assert_empty %w[1 2] - workers, "both worker Ractors logged"
    refute_includes File.read(worker.log), "finished", "routed lines do not also go to stderr"
  end

  # Jobs moved back to their channel are named one by one: handed back at
  # shutdown (the claims a stopping node held), and recovered from a node
  # that died (by the node that recovers them).
  def test_jobs_handed_back_at_shutdown_and_recovered_from_a_dead_node_are_logged_by_id
    path = ledger_path
    stopping = spawn_worker("--log-format", "json", "--shutdown-timeout", "0", "--concurrency", "1",
                            env: {"SOLID_JOBS_TEST_PREFETCH" => "4"}, name: "stopping")
    node = stopping.node_id(redis)
    held = SlowTask.enqueue_many(Array.new(3) { |i| [path, "held-#{i}", 5] })
    eventually("all three claimed") { redis.hlen(key("claims:#{node}")) == 3 }
    stop(stopping)
    handed_back = json_lines(stopping.log).select { |l| l["event"] == "job.requeued" }
    assert_equal held.sort, handed_back.map { |l| l["job_id"] }.sort
    assert(handed_back.all? { |l| l.values_at("level", "task", "channel", "node_id") == ["INFO", "SlowTask", "default", node] })

    victim = spawn_worker("--concurrency", "1", env: {"SOLID_JOBS_TEST_PREFETCH" => "4"}, name: "victim")
    dead = victim.node_id(redis)
    eventually("the victim holds them") { redis.hlen(key("claims:#{dead}")) == 3 }
    victim.kill!
    rescuer = spawn_worker("--log-format", "json", name: "rescuer")
    eventually("recovered", timeout: 30) do
      File.read(rescuer.log).include?("job.recovered") && !redis.exists?(key("claims:#{dead}"))
    end
    rescuer.kill!
    recovered = json_lines(rescuer.log).select { |l| l["event"] == "job.recovered" }
    assert_equal held.sort, recovered.map { |l| l["job_id"] }.sort
    assert(recovered.all? { |l| l.values_at("level", "task", "dead_node_id") == ["INFO", "SlowTask", dead] })
  end
end
