# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Producers that deploy before workers (a rolling deploy), and a worker
# started without the --require that loads the tasks: real worker
# processes, real Redis, and the `solid-jobs archive reenqueue` command.
class UnknownTaskTest < SolidJobsTest
  TASKLESS_APP = File.join(WorkerProcess::ROOT, "test", "support", "taskless_app.rb")

  def teardown
    @workers&.each(&:kill!)
    super
    @engine&.cleanup
  end

  def spawn_worker(name, app: WorkerProcess::APP, env: {}, args: [])
    log = File.join(@ledger_dir, "#{name}.log")
    (@workers ||= []) << WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, app: app,
                                           args: ["--concurrency", "1", *args], env: env).start
    @workers.last
  end

  def stop(worker)
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(worker.log)
    @workers.delete(worker)
  end

  def run_archive_command(*args)
    out, err, status = SolidJobsCommand.capture3({}, "archive", "reenqueue", *args,
                                                 "--redis-url", REDIS.url, "--namespace", @namespace)
    assert status.success?, "exit #{status.exitstatus}: #{err}"
    out
  end

  def attempts(id)
    raw = redis.hget(key("attempts"), id)
    raw && JSON.parse(raw)
  end

  # The old workers do not know the task yet: the job waits in `retrying`
  # (not the archive) and runs once a worker with the code takes over.
  def test_a_job_enqueued_before_the_workers_deploy_runs_after_it
    path = ledger_path
    old = spawn_worker("old", app: TASKLESS_APP)
    id = LedgerTask.enqueue(path, "deployed")
    eventually("the old worker tried it twice") { attempts(id)&.fetch("unknown", 0).to_i >= 2 }
    record = attempts(id)
    assert_equal "SolidJobs::UnknownTaskError", record["error_class"]
    assert_match(/unknown task LedgerTask .*--require/, record["message"])
    assert_nil record["failures"], "not a failure of the task: max_failures is not used up"
    assert_equal 0, redis.zcard(key("archive")), "retried, not archived"
    log = File.read(old.log)
    assert_match(/no task classes are loaded .*--require PATH/, log)
    assert_match(/unknown-task attempt 1, retry in/, log)
    stop(old)

    new = spawn_worker("new")
    eventually("the new worker ran it") { ledger_lines.size == 1 }
    assert_match(/\Adeployed /, ledger_lines.first)
    eventually("acknowledged") { claims_count.zero? && redis.zcard(key("retrying")).zero? }
    assert_nil attempts(id)
    assert_equal 0, redis.zcard(key("archive"))
    refute_match(/no task classes are loaded/, File.read(new.log))
  end

  # Bounded: after unknown_task_retry_for the job is archived as
  # SolidJobs::UnknownTaskError, while an undecodable entry is quarantined
  # at once; the command re-enqueues by task, by error class, or all.
  def test_unknown_tasks_are_archived_after_the_bound_and_reenqueued_in_bulk
    path = ledger_path
    redis.lpush(key("channel:default"), "{garbage")
    worker = spawn_worker("taskless", app: TASKLESS_APP, env: {"SOLID_JOBS_TEST_UNKNOWN_TASK_RETRY_FOR" => "1.5"},
                                      args: %w[--channel default --channel critical])
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    eventually("the undecodable entry quarantined") { redis.zcard(key("archive")) == 1 }
    ledger = LedgerTask.enqueue(path, "ledger")
    critical = CriticalTask.enqueue(path, "critical")
    eventually("both archived once the bound passed") { redis.zcard(key("archive")) == 3 }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :>=, 1.5
    [ledger, critical].each do |id|
      record = SolidJobs::Archive.find(id)
      assert_equal "SolidJobs::UnknownTaskError", record["error_class"]
      assert_match(/still unknown after \d+ attempt\(s\) over [\d.]+s \(unknown_task_retry_for 1.5\)/, record["reason"])
      assert_operator record["failures"], :>=, 2, "retried before it was archived"
    end
    garbage = redis.hvals(key("archive:entries")).map { |r| JSON.parse(r) }.find { |r| r["raw"] == "{garbage" }
    assert_match(/invalid envelope/, garbage["reason"])
    stop(worker)

    out = run_archive_command("--task", "LedgerTask")
    assert_match(/\(task LedgerTask\): 1 re-enqueued, 0 undecodable \(left quarantined\), 0 skipped/, out)
    assert_equal [ledger], redis.lrange(key("channel:default"), 0, -1).map { |raw| JSON.parse(raw)["id"] }
    out = run_archive_command("--error", "SolidJobs::UnknownTaskError")
    assert_match(/1 re-enqueued, 0 undecodable/, out)
    assert_equal 1, redis.llen(key("channel:critical"))
    out = run_archive_command("--all")
    assert_match(/\(all\): 0 re-enqueued, 1 undecodable \(left quarantined\), 0 skipped/, out)
    assert_equal 1, redis.zcard(key("archive")), "the undecodable entry stays quarantined"

    spawn_worker("deployed", args: %w[--channel default --channel critical])
    eventually("both ran") { ledger_lines.size == 2 }
    assert_equal %w[critical ledger], ledger_lines.map { |l| l.split.first }.sort
  end

  # SolidEngine does not date failures: the bound is counted from the
  # engine's deliveries and the backoff's least delays, and still holds.
  def test_on_solid_engine_the_bound_holds_too
    @engine = EngineServer.new.start
    configure_solid_jobs(backend: :solid_engine, url: @engine.url,
                         backends: {solid_engine: {adapter: :solid_engine, url: @engine.url, lease: 30.0}})
    backend = SolidJobs.routing.backend_for("default")
    id = LedgerTask.enqueue(ledger_path, "engine")
    enqueued = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    worker = spawn_worker("engine", app: TASKLESS_APP, env: {"SOLID_JOBS_TEST_ENGINE_URL" => @engine.url,
                                                             "SOLID_JOBS_TEST_UNKNOWN_TASK_RETRY_FOR" => "1.5"})
    eventually("retried first") { backend.get_job(id)&.fetch("attempts").to_i >= 2 && backend.get_job(id)["state"] != "dead" }
    eventually("given up") { %w[archived dead].include?(backend.get_job(id)&.fetch("state")) }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - enqueued, :>=, 1.5
    # The worker logs the give-up after the engine recorded it.
    given_up = /LedgerTask #{id} archived: the task is still unknown after \d+ attempt/
    eventually("the give-up is logged") { File.read(worker.log).match?(given_up) }
    assert_empty ledger_lines
  end

  def test_archive_command_usage_errors
    [[[], /say which jobs/], [%w[--all --task X], /do not combine/], [%w[--bogus], /invalid option/]].each do |args, pattern|
      _, err, status = SolidJobsCommand.capture3({}, "archive", "reenqueue", *args)
      assert_equal 64, status.exitstatus, err
      assert_match pattern, err
    end
    _, err, status = SolidJobsCommand.capture3({}, "archive", "nope")
    assert_equal 64, status.exitstatus
    assert_match(/expected a subcommand: reenqueue/, err)
    out, _, status = SolidJobsCommand.capture3({}, "archive", "--help")
    assert status.success?
    assert_match(/--task NAME.*--error CLASS.*--all/m, out)
  end
end
