# frozen_string_literal: true

require_relative "test_helper"
require "digest"
require "set"
require "rbconfig"
require "English"
require "rack/mock"
require "solid_jobs/web"
require_relative "support/recording_instrumenter"

# Unique jobs (docs/unique.md): the lock is written with the job and
# released by the scripts that move it, at each mode's release point;
# duplicates return the live job's id and write nothing; no lock outlives
# its job.
class UniqueTest < SolidJobsTest
  def teardown
    @workers&.each { |w| w.signal("KILL") && w.wait(timeout: 5) }
    super
  end

  def lock_keys = redis.keys(key("unique:*"))

  # The lock of `task`'s job keyed by `material`, computed here from the
  # documented format: SHA-256 of "<task>\0<canonical JSON>", 32 hex digits.
  def lock_key(task, material)
    key("unique:#{Digest::SHA256.hexdigest("#{task}\0#{JSON.generate(material)}")[0, 32]}")
  end

  def channel_length = redis.llen(key("channel:default"))
  def started(label) = ledger_lines.count("start #{label}")
  def completed(label) = ledger_lines.count { |l| l.start_with?("#{label} ") }

  def redis_now_ms
    seconds, micros = redis.time
    (seconds * 1000) + (micros / 1000)
  end

  # Enqueues `task`'s job keyed by `label`, starts a node and waits until
  # the job runs, so it was claimed; then checks the mode's claim-time rule
  # (docs/unique.md): `:queued` released, the others still naming the job.
  # Skipped for a task with `for:`, whose bound may have expired the lock
  # by then. Returns the job's id.
  def with_claimed(task, label, behaviour = "sleep:1")
    id = task.enqueue(ledger_path, label, behaviour)
    start_conductor unless @conductor
    eventually("#{label} running") { started(label) == 1 }
    unique = task.solid_jobs_options.fetch(:unique)
    lock = lock_key(task.name, label)
    if unique[:for_ms]
      nil
    elsif unique[:while] == :queued
      refute redis.exists?(lock), "claimed: a :queued job's lock is gone"
    else
      assert_equal id, redis.get(lock), "claimed: a #{unique[:while].inspect} job keeps its lock"
    end
    id
  end

  # Enqueues `task`'s job keyed by `label` with a failing behaviour and
  # waits until it is given up into the archive; returns its id.
  def with_archived(task, label, behaviour = "fail")
    id = task.enqueue(ledger_path, label, behaviour)
    start_conductor unless @conductor
    eventually("#{label} archived") { SolidJobs::Archive.find(id) }
    id
  end

  # Waits until Redis' clock is `age_ms` past the time job `id` was
  # archived (the archive zset's score).
  def wait_past_archive_age(id, age_ms)
    archived_at = redis.zscore(key("archive"), id) or flunk("#{id} is not archived")
    eventually("archive_max_age passed on Redis' clock", timeout: 10) { redis_now_ms > archived_at + age_ms }
  end

  def test_a_duplicate_returns_the_live_jobs_id_and_writes_nothing
    path = ledger_path
    id = UniqueQueuedTask.enqueue(path, "a")
    assert_equal id, UniqueQueuedTask.enqueue(path, "a", "other arguments, same key")
    other = UniqueQueuedTask.enqueue(path, "b")
    refute_equal id, other
    assert_equal 2, channel_length, "the duplicate was not written"
    assert_equal id, redis.get(lock_key("UniqueQueuedTask", "a")), "the lock names its job, under the documented key"
    assert_equal [lock_key("UniqueQueuedTask", "a"), lock_key("UniqueQueuedTask", "b")].sort, lock_keys.sort
    assert_equal(-1, redis.pttl(lock_key("UniqueQueuedTask", "a")), "without for:, the lock has no expiry")
  end

  def test_enqueue_many_reports_duplicates_by_index
    path = ledger_path
    first = UniqueQueuedTask.enqueue(path, "x")
    ids = UniqueQueuedTask.enqueue_many([[path, "x"], [path, "y"], [path, "y"], [path, "z"]])
    assert_kind_of SolidJobs::Enqueued, ids
    assert_equal 4, ids.size
    assert_equal first, ids[0], "a duplicate's entry is the live job's id"
    assert_equal ids[1], ids[2], "a key repeated in one batch is one job"
    assert_equal [0, 2], ids.duplicates
    assert ids.duplicate?(2)
    refute ids.duplicate?(3)
    assert_equal 3, channel_length
  end

  def test_by_arguments_and_by_constant
    a = UniqueByArgumentsTask.enqueue(1, {"b" => 2, "a" => 1})
    assert_equal a, UniqueByArgumentsTask.enqueue(1, {"a" => 1, "b" => 2}), "hash key order is not part of the key"
    refute_equal a, UniqueByArgumentsTask.enqueue(2)
    assert redis.exists?(lock_key("UniqueByArgumentsTask", [1, {"a" => 1, "b" => 2}]))
    c = UniqueConstantTask.enqueue(1)
    assert_equal c, UniqueConstantTask.enqueue(2), "by: a constant: one job whatever the arguments"
    assert_operator redis.pttl(lock_key("UniqueConstantTask", "only-one")), :<=, 300
    batch = UniqueConstantTask.enqueue_many([[3], [4]])
    assert_equal [c, c], batch.to_a, "a batch against a held constant key: duplicates of the live job"
    assert_equal [0, 1], batch.duplicates
  end

  def test_a_batch_with_for_takes_each_lock_with_its_bound
    redis.del(lock_key("UniqueConstantTask", "only-one"))
    ids = UniqueBoundedRunningTask.enqueue_many([[ledger_path, "p"], [ledger_path, "q"], [ledger_path, "p"]])
    assert_equal [2], ids.duplicates
    %w[p q].each do |label|
      ttl = redis.pttl(lock_key("UniqueBoundedRunningTask", label))
      assert_operator ttl, :>, 0, "for: bounds every lock of the batch"
      assert_operator ttl, :<=, 300
    end
  end

  def test_for_bounds_the_lock
    first = UniqueConstantTask.enqueue(1)
    eventually("for: 0.3 s elapsed", timeout: 5) { !redis.exists?(lock_key("UniqueConstantTask", "only-one")) }
    second = UniqueConstantTask.enqueue(1)
    refute_equal first, second, "after for:, the key is free although the first job still waits"
    assert_equal 2, channel_length
  end

  def test_a_lock_taken_over_while_its_job_runs_is_not_released_by_that_job
    path = ledger_path
    id = with_claimed(UniqueRunningTask, "over")
    lock = lock_key("UniqueRunningTask", "over")
    other = SecureRandom.uuid
    redis.set(lock, other) # another job's lock now (as after for: expired and a new job took the key)
    eventually("completed") { completed("over") == 1 }
    eventually("acked") { redis.hget(key("jobs"), id).nil? }
    assert_equal other, redis.get(lock), "compare-and-delete: the ack left another job's lock alone"
    # The new job runs until the test has looked at the lock: queued or
    # running, it holds it (while: :running).
    release = File.join(@ledger_dir, "release-over")
    fresh = UniqueRunningTask.enqueue(path, "over", "await:#{release}")
    refute_equal other, fresh, "a lock whose holder is not live is taken over at enqueue"
    assert_equal fresh, redis.get(lock)
    File.write(release, "")
    eventually("the new job ran") { completed("over") == 2 }
    eventually("released") { lock_keys.empty? }
  end

  def test_for_shorter_than_the_job_lets_a_second_job_in_while_the_first_runs
    path = ledger_path
    first = with_claimed(UniqueBoundedRunningTask, "bounded")
    eventually("for: expired", timeout: 5) { !redis.exists?(lock_key("UniqueBoundedRunningTask", "bounded")) }
    refute_equal first, UniqueBoundedRunningTask.enqueue(path, "bounded")
    eventually("both completed") { completed("bounded") == 2 }
    eventually("released or expired") { lock_keys.empty? }
  end

  def test_integrity_check_reports_a_lock_whose_job_is_gone
    id = UniqueRunningTask.enqueue(ledger_path, "live")
    assert_empty SolidJobs::IntegrityCheck.run.stale_locks, "a live job's lock is not stale"
    ghost = SecureRandom.uuid
    redis.set(lock_key("UniqueRunningTask", "ghost"), ghost) # as a Redis that lost writes could leave it
    report = SolidJobs::IntegrityCheck.run
    assert_equal [{lock: lock_key("UniqueRunningTask", "ghost"), job_id: ghost}], report.stale_locks
    refute report.ok?
    refute_equal ghost, UniqueRunningTask.enqueue(ledger_path, "ghost"), "the next enqueue of its key takes it over"
    assert_empty SolidJobs::IntegrityCheck.run.stale_locks
    assert_equal id, redis.get(lock_key("UniqueRunningTask", "live"))
  end

  def test_bad_options_are_refused_at_class_definition
    # for: 1e16 s would overflow the lock's PX in Redis mid-script.
    bad = [{while: :forever}, {by: 42}, {for: 0}, {for: -1}, {for: 1e16}, {sometimes: true}, :yes]
    bad.each do |unique|
      assert_raises(SolidJobs::ConfigurationError, unique.inspect) do
        Class.new { include SolidJobs::Task }.task_options(unique: unique)
      end
    end
    mutable = +"captured"
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.task_options(unique: {by: ->(*) { mutable }})
    end
    assert_match(/shareable/, error.message)
  end

  def test_a_by_proc_that_cannot_take_the_arguments_is_an_argument_error
    klass = Class.new do
      include SolidJobs::Task
      task_options unique: {by: ->(a) { a }}
      def execute_task(*) = nil
    end
    Object.const_set(:UniqueArityProbe, klass) unless defined?(::UniqueArityProbe)
    error = assert_raises(ArgumentError) { UniqueArityProbe.enqueue(1, 2) }
    assert_match(/nothing was enqueued/, error.message)
    assert_empty lock_keys
  end

  def test_solid_engine_channels_refuse_unique_tasks
    configure_solid_jobs(backend: :solid_engine, url: "tcp://127.0.0.1:#{RedisServer.closed_port}", backends: {})
    error = assert_raises(SolidJobs::Backends::NotSupported) { UniqueQueuedTask.enqueue("/dev/null", "e") }
    assert_match(/idempotent by job id only/, error.message)
  end

  def test_unique_tasks_refuse_the_publication_paths_they_do_not_support_yet
    interceptor = Class.new do
      def around(_publication) = yield
    end
    SolidJobs.config.publish_interceptors.use(interceptor)
    error = assert_raises(SolidJobs::Backends::NotSupported) { UniqueQueuedTask.enqueue(ledger_path, "i") }
    assert_match(/interceptors/, error.message)
    configure_solid_jobs(instrumenter: RecordingInstrumenter.new(ledger_path("events")))
    assert_raises(SolidJobs::Backends::NotSupported) { UniqueQueuedTask.enqueue(ledger_path, "i") }
    assert_equal 0, channel_length
    assert_empty lock_keys
  end

  def test_unique_and_recurring_together_are_refused
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.task_options(unique: {while: :running}, recurring: {every: 60})
    end
    assert_match(/unique and recurring cannot be combined/, error.message)
    SolidJobs.configure { |c| c.recurring = {"tick" => {task: "UniqueQueuedTask", every: 60}} }
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::Recurring.schedules }
    assert_match(/schedule "tick": UniqueQueuedTask is unique/, error.message)
  end

  def test_a_unique_task_whose_arguments_need_the_warm_pool_is_refused_not_duplicated
    SolidJobs::WarmPool.assume_rails = true
    Object.const_set(:UniquePooledProbe, Class.new(LedgerTask) do
      @pool = Mutex.new
      task_options unique: {while: :running}
    end)
    error = assert_raises(SolidJobs::Backends::NotSupported) { UniquePooledProbe.enqueue(+"/dev/null", +"x") }
    assert_match(/warm pool/, error.message)
    assert_equal 0, channel_length
    assert_empty lock_keys
  ensure
    SolidJobs::WarmPool.assume_rails = nil
    Object.send(:remove_const, :UniquePooledProbe) if defined?(UniquePooledProbe)
  end

  def test_an_empty_enqueue_many_writes_nothing
    ids = UniqueQueuedTask.enqueue_many([])
    assert_equal [], ids.to_a
    assert_equal [], ids.duplicates
  end

  def test_queued_releases_at_claim
    path = ledger_path
    id = with_claimed(UniqueQueuedTask, "q")
    second = UniqueQueuedTask.enqueue(path, "q")
    refute_equal id, second, "a running :queued job does not block a new one"
    eventually("both ran") { completed("q") == 2 }
    eventually("no lock left") { lock_keys.empty? }
  end

  def test_running_holds_while_running_and_releases_at_ack
    path = ledger_path
    id = with_claimed(UniqueRunningTask, "r")
    assert_equal id, UniqueRunningTask.enqueue(path, "r"), "a running job is the duplicate's answer"
    eventually("completed") { completed("r") == 1 }
    eventually("released at ack") { lock_keys.empty? }
    refute_equal id, UniqueRunningTask.enqueue(path, "r"), "a finished job leaves the key free"
    eventually("second ran") { completed("r") == 2 }
  end

  def test_running_keeps_the_lock_across_a_retry
    path = ledger_path
    id = UniqueRunningTask.enqueue(path, "retry", "fail_once")
    start_conductor
    eventually("retrying") { redis.zcard(key("retrying")) == 1 }
    assert_equal id, redis.get(lock_key("UniqueRunningTask", "retry")), "kept while the job waits for its retry"
    assert_equal id, UniqueRunningTask.enqueue(path, "retry")
    eventually("the retry completed") { completed("retry") == 1 }
    eventually("released at ack") { lock_keys.empty? }
  end

  def test_running_releases_when_given_up
    path = ledger_path
    id = with_archived(UniqueRunningTask, "give-up")
    assert_empty lock_keys, "given up (archived): released"
    refute_equal id, UniqueRunningTask.enqueue(path, "give-up", "ok")
  end

  def test_until_done_keeps_the_lock_in_the_archive_until_the_entry_goes
    path = ledger_path
    id = with_archived(UniqueUntilDoneTask, "u")
    assert_equal id, redis.get(lock_key("UniqueUntilDoneTask", "u")), "not done: still locked"
    assert_equal id, UniqueUntilDoneTask.enqueue(path, "u"), "the archived job answers duplicates"
    found = SolidJobs::Console.new.find(id)
    assert_equal({"lock" => lock_key("UniqueUntilDoneTask", "u"), "while" => "until_done", "held" => true}, found["unique"],
                 "Console#find (and the dashboard's job page) shows the lock")
    page = SolidJobs::Web.new.call(Rack::MockRequest.env_for("/executions/#{id}"))
    html = page[2].each.to_a.join
    assert_includes html, "Unique lock"
    assert_includes html, lock_key("UniqueUntilDoneTask", "u")
    assert SolidJobs::Archive.new.forget(id)
    assert_empty lock_keys, "forgetting the archived job releases its lock"
    refute_equal id, UniqueUntilDoneTask.enqueue(path, "u", "ok")
    eventually("the new job completed") { completed("u") == 1 }
    eventually("released at ack") { lock_keys.empty? }
  end

  def test_until_done_archived_lock_follows_a_reenqueue_and_goes_at_completion
    id = with_archived(UniqueUntilDoneTask, "again", "fail_once")
    assert_equal id, redis.get(lock_key("UniqueUntilDoneTask", "again")), "archived: still locked"
    assert SolidJobs::Archive.reenqueue(id)
    eventually("the re-enqueued job completed") { completed("again") == 1 }
    eventually("released at ack") { lock_keys.empty? }
  end

  def test_until_done_lock_goes_when_the_archive_trims_its_entry
    configure_solid_jobs(archive_max_entries: 1)
    path = ledger_path
    first = with_archived(UniqueUntilDoneTask, "t1")
    assert redis.exists?(lock_key("UniqueUntilDoneTask", "t1"))
    second = UniqueUntilDoneTask.enqueue(path, "t2", "fail")
    eventually("second archived, first trimmed") { SolidJobs::Archive.find(second) && !SolidJobs::Archive.find(first) }
    refute redis.exists?(lock_key("UniqueUntilDoneTask", "t1")), "trimmed with its entry"
    assert redis.exists?(lock_key("UniqueUntilDoneTask", "t2"))
  end

  def test_until_done_archived_holder_stops_counting_at_archive_max_age_without_any_discard
    configure_solid_jobs(archive_max_age: 2)
    lock = lock_key("UniqueUntilDoneTask", "aged")
    id = with_archived(UniqueUntilDoneTask, "aged")
    assert_equal id, UniqueUntilDoneTask.enqueue(ledger_path, "aged"), "younger than archive_max_age: the archived job answers"
    wait_past_archive_age(id, 2000)
    fresh = UniqueUntilDoneTask.enqueue(ledger_path, "aged", "sleep:1")
    refute_equal id, fresh, "older than archive_max_age: the key is free, trimmed or not"
    assert_equal fresh, redis.get(lock), "the stale lock was taken over by the same script"
    assert redis.zscore(key("archive"), id), "no discard ran since: the stale entry was never trimmed"
    assert_empty SolidJobs::IntegrityCheck.run.stale_locks
    assert SolidJobs::Archive.new.forget(id)
    assert_equal fresh, redis.get(lock), "forgetting the stale entry leaves its successor's lock"
    eventually("the new job completed") { completed("aged") == 1 }
    eventually("released at ack") { lock_keys.empty? }
  end

  def test_a_stale_archived_job_reenqueued_after_a_takeover_leaves_its_successors_lock
    configure_solid_jobs(archive_max_age: 1)
    lock = lock_key("UniqueUntilDoneTask", "stale")
    id = with_archived(UniqueUntilDoneTask, "stale", "fail_once")
    wait_past_archive_age(id, 1000)
    successor = UniqueUntilDoneTask.enqueue(ledger_path, "stale", "sleep:4")
    refute_equal id, successor
    assert SolidJobs::Archive.reenqueue(id), "the entry is still there to re-enqueue"
    eventually("the re-enqueued job ran and was acked") { redis.hget(key("jobs"), id).nil? }
    assert_equal successor, redis.get(lock), "its ack is compare-and-delete: the successor keeps its lock"
    eventually("both completed") { completed("stale") == 2 }
    eventually("released at the successor's ack") { lock_keys.empty? }
  end

  def test_a_thousand_job_batch_with_many_duplicates
    path = ledger_path
    held = UniqueQueuedTask.enqueue(path, "k0")
    ids = UniqueQueuedTask.enqueue_many(Array.new(1000) { |i| [path, "k#{i % 100}"] })
    assert_equal 1000, ids.size
    # k0 is held by an earlier job; k1..k99 are written at their first
    # index (1..99); every later index repeats one of them.
    expected = (0...1000).reject { |i| (1..99).cover?(i) }
    assert_equal expected, ids.duplicates
    wanted = expected.to_set
    1000.times { |i| assert_equal wanted.include?(i), ids.duplicate?(i), "duplicate?(#{i})" }
    refute ids.duplicate?(1000)
    assert_equal held, ids[0]
    1000.times { |i| assert_equal ids[i % 100], ids[i], "index #{i} stands for its key's job" }
    assert_equal 99, ids[1, 99].uniq.size
    100.times { |k| assert_equal ids[k], redis.get(lock_key("UniqueQueuedTask", "k#{k}")) }
    assert_equal 100, channel_length
    assert_equal 100, lock_keys.size
  end

  def test_a_cancelled_job_frees_its_key_and_takes_its_lock_when_dropped
    path = ledger_path
    backend = SolidJobs.routing.backend_for("default")
    cancelled = UniqueRunningTask.enqueue(path, "c")
    assert backend.cancel(cancelled)
    replacement = UniqueRunningTask.enqueue(path, "c")
    refute_equal cancelled, replacement, "a cancelled job does not hold its key"
    assert_equal replacement, redis.get(lock_key("UniqueRunningTask", "c"))
    start_conductor
    eventually("the replacement ran") { completed("c") == 1 }
    eventually("no lock left") { lock_keys.empty? }
    assert_equal 1, started("c"), "the cancelled job was dropped, not run"
  end

  def test_a_cancelled_job_dropped_alone_releases_its_lock
    backend = SolidJobs.routing.backend_for("default")
    cancelled = UniqueRunningTask.enqueue(ledger_path, "alone")
    assert backend.cancel(cancelled)
    start_conductor
    eventually("dropped at claim") { redis.hlen(key("jobs")).zero? }
    assert_empty lock_keys
  end

  def test_scheduled_unique_jobs_take_the_lock_when_planned
    path = ledger_path
    id = UniqueRunningTask.enqueue_after(0.5, path, "later")
    assert_equal id, UniqueRunningTask.enqueue(path, "later"), "a planned job holds its key"
    assert_equal 1, redis.zcard(key("planned"))
    start_conductor
    eventually("ran once") { completed("later") == 1 }
    eventually("released") { lock_keys.empty? }
  end

  def test_ten_thousand_concurrent_enqueues_of_one_key_from_threads_and_processes_give_one_job
    path = ledger_path
    script = <<~RUBY
      require "solid_jobs"
      require_relative #{File.expand_path("support/tasks", __dir__).inspect}
      SolidJobs.configure { |c| c.redis_url = #{REDIS.url.inspect}; c.namespace = #{@namespace.inspect} }
      ids = Array.new(2) { Thread.new { Array.new(625) { UniqueRunningTask.enqueue(#{path.inspect}, "hot") } } }.flat_map(&:value)
      puts ids.uniq.join(",")
    RUBY
    children = Array.new(4) do
      IO.popen({"RUBYLIB" => File.expand_path("../lib", __dir__)}, [RbConfig.ruby, "-e", script], err: File::NULL)
    end
    here = Array.new(4) { Thread.new { Array.new(625) { UniqueRunningTask.enqueue(path, "hot") } } }.flat_map(&:value)
    theirs = children.map do |io|
      out = io.read
      io.close
      assert_predicate $CHILD_STATUS, :success?, "a producer process failed"
      out
    end
    ids = here.uniq + theirs.flat_map { |line| line.strip.split(",") }
    assert_equal 4, theirs.count { |line| !line.strip.empty? }, "every producer process answered"
    assert_equal 1, ids.uniq.size, "2,500 enqueues from threads here and 7,500 from 4 processes: one id"
    assert_equal 1, channel_length, "one job written"
    start_conductor
    eventually("it ran") { completed("hot") == 1 }
    eventually("released") { lock_keys.empty? }
  end

  def test_sigkilled_worker_holding_a_running_unique_job_the_job_runs_again_and_the_lock_follows_it
    path = ledger_path
    log = File.join(@ledger_dir, "victim.log")
    victim = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: %w[--concurrency 1]).start
    (@workers ||= []) << victim
    id = UniqueRunningTask.enqueue(path, "killed", "sleep:1.5")
    eventually("victim started the job", timeout: 30) { started("killed") == 1 }
    victim.kill!
    assert_equal id, redis.get(lock_key("UniqueRunningTask", "killed")), "a SIGKILL leaves the lock with its job"
    assert_equal id, UniqueRunningTask.enqueue(path, "killed"), "the dead node's job still answers duplicates"
    rescuer_log = File.join(@ledger_dir, "rescuer.log")
    @workers << WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: rescuer_log,
                                  args: %w[--concurrency 1]).start
    eventually("recovered and started again", timeout: 30) { started("killed") == 2 }
    assert_equal id, redis.get(lock_key("UniqueRunningTask", "killed")), "the lock follows the recovered job"
    eventually("completed", timeout: 30) { completed("killed") == 1 }
    eventually("released at ack") { lock_keys.empty? }
  end
end
