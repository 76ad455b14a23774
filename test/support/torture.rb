# frozen_string_literal: true

require "json"
require "redis"
require "tmpdir"
require "fileutils"
require_relative "processes"

# The torture driver: several worker processes over several channels work
# through a backlog while the driver SIGKILLs random workers at random
# moments (restarting them) and restarts Redis (AOF on, fsync always). At
# the end it checks, from the ledger the tasks write, that every job
# completed at least once and nothing is left claimed or ready. Every fifth
# job is a unique job (one `while:` mode per channel), enqueued twice: the
# second enqueue must be a duplicate, and no lock may be left once every
# job is done. Every seventh other job is concurrency limited (5 keys at
# limit 2 across the channels): from the start and end times those jobs
# write, no key may have had more than 2 runs at once (a killed run ends
# at its kill), and no slot or blocked job may be left. Every eleventh
# other job is rate limited (4 keys at 20 starts per 1 s across the
# channels): from the start times those jobs write, no key may have had
# more than 20 starts in any window of 1 s (a run again after a kill or a
# Redis restart is a start: its claim was admitted again), and no throttled
# job, rate log past its window or wake of an empty key may be left. A
# quarter of the plain, limited and rate limited jobs carry a priority
# (0..9, per job with `Task.set`), so the level lists `channel:<name>:<p>`
# go through the kills, recoveries and restarts too; none may hold a job at
# the end.
# With `recurring: true` every worker also runs an `every: 1` schedule (its
# jobs go to a channel no worker serves) and the run checks that no tick
# was enqueued twice through the kills and restarts.
#
# Used by `SOLID_JOBS_TORTURE=1 TORTURE_JOBS=100000 bundle exec rake torture`
# and, small, by test/torture_test.rb.
class Torture
  CHANNELS = %w[alpha beta gamma].freeze
  NAMESPACE = "torture"

  Result = Struct.new(:jobs, :kills, :redis_restarts, :completed, :duplicates, :missing, :recovery_delays,
                      :leftover_claims, :leftover_ready, :elapsed, :seed, :unique_jobs, :unique_written_twice,
                      :leftover_locks, :recurring_ticks, :recurring_duplicates, :limited_jobs, :limit_exceeded,
                      :leftover_slots, :leftover_blocked, :rate_jobs, :rate_exceeded, :rate_busiest, :rate_reruns, :handed_back,
                      :leftover_throttled, :leftover_rate_logs, :leftover_wakes, :prioritized_jobs, :leftover_levels,
                      keyword_init: true) do
    def ok? = missing.zero? && leftover_claims.zero? && leftover_ready.zero? && leftover_locks.zero? &&
      unique_written_twice.zero? && recurring_duplicates.to_i.zero? && limit_exceeded.zero? &&
      leftover_slots.zero? && leftover_blocked.zero? && rate_exceeded.zero? && leftover_throttled.zero? &&
      leftover_rate_logs.zero? && leftover_wakes.zero? && leftover_levels.zero?

    def percentile(p)
      return nil if recovery_delays.empty?

      sorted = recovery_delays.sort
      sorted[((sorted.size - 1) * p).round]
    end

    def summary
      p50 = percentile(0.5)
      max = recovery_delays.max
      format("jobs %d, completed %d, duplicates %d, missing %d, kills %d, redis restarts %d, " \
             "recovery delay p50 %s max %s, leftover claims %d, leftover ready %d, unique jobs %d " \
             "(written twice %d, locks left %d), %.1fs (seed %d)",
             jobs, completed, duplicates, missing, kills, redis_restarts, p50 ? format("%.2fs", p50) : "n/a",
             max ? format("%.2fs", max) : "n/a", leftover_claims, leftover_ready, unique_jobs, unique_written_twice,
             leftover_locks, elapsed, seed) +
        format(", limited jobs %d (limit exceeded %d, slots left %d, blocked left %d)", limited_jobs, limit_exceeded,
               leftover_slots, leftover_blocked) +
        format(", rate limited jobs %d (most starts of a key in %ds %d of %d, over the rate %d, started again %d, " \
               "handed back %d, throttled left %d, rate logs left %d, wakes left %d)", rate_jobs, TortureTask::Rated::PER,
               rate_busiest, TortureTask::Rated::LIMIT, rate_exceeded, rate_reruns, handed_back, leftover_throttled,
               leftover_rate_logs, leftover_wakes) +
        format(", prioritized jobs %d (left in level lists %d)", prioritized_jobs, leftover_levels) +
        (recurring_ticks ? format(", recurring ticks %d (enqueued twice: %d)", recurring_ticks, recurring_duplicates) : "")
    end
  end

  def initialize(jobs:, workers: 3, concurrency: 2, kills: 3, redis_restarts: 1, work_ms: 2, timeout: 600,
                 seed: Random.new_seed, out: $stdout, recurring: false)
    @jobs = jobs
    @worker_count = workers
    @concurrency = concurrency
    @kills_wanted = kills
    @restarts_wanted = redis_restarts
    @work_ms = work_ms
    @timeout = timeout
    @seed = seed
    @random = Random.new(seed)
    @out = out
    @recurring = recurring
  end

  def run
    @dir = Dir.mktmpdir("solid-jobs-torture")
    @redis_server = RedisServer.new(appendonly: true).start
    @redis = Redis.new(url: @redis_server.url, reconnect_attempts: 0)
    @started = monotonic
    seed_jobs
    @workers = Array.new(@worker_count) { |i| spawn_worker(i) }
    @recoveries = []
    drive
    await_recoveries
    stop_workers
    verify
  ensure
    @workers&.each { |w| w.signal("KILL") }
    @workers&.each do |w| # rubocop:disable Style/CombinableLoops -- every worker is killed before any is waited for
      w.wait(timeout: 5)
    rescue StandardError
      nil
    end
    @redis_server&.cleanup
    FileUtils.rm_rf(@dir) if @dir
  end

  private

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  def key(suffix) = "#{NAMESPACE}:#{suffix}"

  def log(message)
    @out.puts(format("[torture %6.2fs] %s", monotonic - @started, message))
  end

  # Each job: [sequence number, ledger directory, milliseconds of work].
  def seed_jobs
    SolidJobs.configure do |c|
      c.redis_url = @redis_server.url
      c.namespace = NAMESPACE
    end
    @unique_jobs = 0
    @unique_written_twice = 0
    @limited_jobs = 0
    @rate_jobs = 0
    @prioritized_jobs = 0
    @kill_times = {}
    (0...@jobs).each_slice(1000) do |slice|
      slice.group_by { |seq| CHANNELS[seq % CHANNELS.size] }.each do |channel, seqs|
        unique, plain = seqs.partition { |seq| (seq % 5).zero? }
        limited, plain = plain.partition { |seq| (seq % 7).zero? }
        rated, plain = plain.partition { |seq| (seq % 11).zero? }
        enqueue_by_priority(TortureTask.for_channel(channel), plain)
        enqueue_by_priority(TortureTask.limited_for_channel(channel), limited)
        enqueue_by_priority(TortureTask.rated_for_channel(channel), rated)
        @limited_jobs += limited.size
        @rate_jobs += rated.size
        next if unique.empty?

        task = TortureTask.unique_for_channel(channel)
        lists = unique.map { |seq| [seq, @dir, @work_ms] }
        first = task.enqueue_many(lists)
        # No worker runs yet, so every lock is still held: each is a duplicate.
        again = task.enqueue_many(lists)
        @unique_jobs += unique.size
        @unique_written_twice += lists.each_index.count { |i| !again.duplicate?(i) || again[i] != first[i] }
      end
    end
    log("seeded #{@jobs} jobs over #{CHANNELS.join(", ")}")
  end

  # One job in four gets a priority from its number (5, the default, among
  # them), enqueued per level with `Task.set`: the others stay in the
  # channel's base list.
  def enqueue_by_priority(task, seqs)
    seqs.group_by { |seq| seq % 4 == 1 ? (seq / 4) % 10 : 5 }.each do |priority, group|
      lists = group.map { |seq| [seq, @dir, @work_ms] }
      priority == 5 ? task.enqueue_many(lists) : task.set(priority: priority).enqueue_many(lists)
      @prioritized_jobs += group.size unless priority == 5
    end
  end

  # Every level list a prioritized job can wait in.
  def level_lists = CHANNELS.product([*0..4, *6..9]).map { |c, p| key("channel:#{c}:#{p}") }

  def spawn_worker(index)
    log_path = File.join(@dir, "worker-#{index}.log")
    WorkerProcess.new(redis_url: @redis_server.url, namespace: NAMESPACE, log: log_path,
                      args: ["--concurrency", @concurrency.to_s, *CHANNELS.flat_map { |c| ["--channel", c] }],
                      env: {"SOLID_JOBS_LOG_LEVEL" => "warn"}.merge(recurring_env)).start
  end

  def recurring_env = @recurring ? {"SOLID_JOBS_TEST_RECURRING_EVERY" => "1"} : {}

  # Kills and Redis restarts are spread over the run by progress, each at a
  # random point of its slice of the backlog and after a random pause.
  def drive
    events = ([:kill] * @kills_wanted + [:restart_redis] * @restarts_wanted).shuffle(random: @random)
    thresholds = events.each_index.map { |i| (i + @random.rand(0.2..0.8)) / (events.size + 1) }
    @kills = 0
    @restarts = 0
    until done?
      raise "torture timed out after #{@timeout}s: #{progress} of #{@jobs} processed" if monotonic - @started > @timeout

      if (threshold = thresholds.first) && progress >= threshold * @jobs
        thresholds.shift
        sleep(@random.rand * 0.2) # the random pause that spreads events over the run (by design)
        events.shift == :kill ? kill_random_worker : restart_redis
      end
      replace_exited_workers
      sleep 0.02 # poll interval of the driver loop, bounded by @timeout above
    end
    log("all #{@jobs} jobs completed at least once")
  end

  def progress
    @redis.get(key("metric:processed")).to_i
  rescue Redis::BaseConnectionError, Redis::CommandError
    0
  end

  def done?
    return false if progress < @jobs

    completed_sequences.size == @jobs
  end

  def completed_sequences
    Dir[File.join(@dir, "ledger-*")].flat_map { |f| File.readlines(f, chomp: true) }.map(&:to_i).uniq
  end

  def kill_random_worker
    index = @random.rand(@workers.size)
    victim = @workers[index]
    node = victim.node_id(@redis)
    @kill_times[victim.pid] = Process.clock_gettime(Process::CLOCK_REALTIME)
    victim.kill!
    @kills += 1
    killed_at = monotonic
    log("SIGKILL worker #{index} (pid #{victim.pid}, node #{node || "unregistered"})")
    @workers[index] = spawn_worker(index)
    watch_recovery(node, killed_at) if node
  end

  # Recovery is complete when the dead node's claims are gone and it is no
  # longer registered.
  def watch_recovery(node, killed_at)
    @recoveries << Thread.new do
      watcher = Redis.new(url: @redis_server.url)
      loop do
        begin
          gone = !watcher.exists?(key("claims:#{node}")) && !watcher.sismember(key("nodes"), node)
          break monotonic - killed_at if gone
        rescue Redis::BaseConnectionError, Redis::CommandError # down, or LOADING after a restart
          nil
        end
        sleep 0.01 # poll interval; await_recoveries bounds the wait
      end
    ensure
      watcher&.close
    end
  end

  def restart_redis
    log("restarting Redis (TERM, AOF fsync always)")
    @redis_server.stop
    sleep(@random.rand(0.2..0.6)) # the outage: Redis stays down a random while, by design
    @redis_server.start
    @restarts += 1
    log("Redis is back")
  end

  # A worker started while Redis was down waits for it; one that exited for
  # any other reason is started again, and the exit is reported.
  def replace_exited_workers
    @workers.each_with_index do |w, i|
      next unless w.exited?

      log("worker #{i} exited on its own (#{w.exit_status.inspect}); restarting it:\n#{w.log_tail(5)}")
      @workers[i] = spawn_worker(i)
    end
  end

  # A node killed near the end may still hold claims when the last job
  # completes; only live workers recover it, so they are stopped after.
  def await_recoveries
    @recoveries.each do |watcher|
      remaining = @timeout - (monotonic - @started)
      next if watcher.join([remaining, 0].max)

      raise "torture timed out after #{@timeout}s waiting for a killed node to be recovered"
    end
  end

  def stop_workers
    @workers.each { |w| w.signal("TERM") }
    @workers.each_with_index do |w, i|
      status = w.wait(timeout: 60)
      log("worker #{i} exited with #{status.inspect}") unless status&.success?
    end
    @workers = nil
  end

  def verify
    lines = Dir[File.join(@dir, "ledger-*")].flat_map { |f| File.readlines(f, chomp: true) }.map(&:to_i)
    unique = lines.uniq
    delays = @recoveries.map(&:value)
    claims = @redis.keys(key("claims:*")).sum { |k| @redis.hlen(k) }
    levels = level_lists.sum { |list| @redis.llen(list) }
    ready = CHANNELS.sum { |c| @redis.llen(key("channel:#{c}")) } + levels + @redis.zcard(key("planned")) +
            @redis.zcard(key("retrying"))
    busiest, exceeded, reruns = rate_windows
    ticks = @recurring ? @redis.lrange(key("channel:recurring"), 0, -1).map { |raw| JSON.parse(raw).dig("meta", "tick_ms") } : nil
    Result.new(jobs: @jobs, kills: @kills, redis_restarts: @restarts, completed: unique.size,
               duplicates: lines.size - unique.size, missing: ((0...@jobs).to_a - unique).size, recovery_delays: delays,
               leftover_claims: claims, leftover_ready: ready, elapsed: monotonic - @started, seed: @seed,
               unique_jobs: @unique_jobs, unique_written_twice: @unique_written_twice,
               leftover_locks: @redis.keys(key("unique:*")).size,
               recurring_ticks: ticks&.uniq&.size, recurring_duplicates: ticks && (ticks.size - ticks.uniq.size),
               limited_jobs: @limited_jobs, limit_exceeded: limit_exceeded,
               leftover_slots: @redis.keys(key("slots:*")).size, leftover_blocked: @redis.keys(key("blocked:*")).size,
               rate_jobs: @rate_jobs, rate_exceeded: exceeded, rate_busiest: busiest, rate_reruns: reruns,
               handed_back: @redis.get(key("metric:handed_back")).to_i,
               leftover_throttled: @redis.keys(key("throttled:*")).sum { |k| @redis.llen(k) },
               leftover_rate_logs: leftover_rate_logs, leftover_wakes: leftover_wakes,
               prioritized_jobs: @prioritized_jobs, leftover_levels: levels)
  end

  # Per rate key, from every start in the rate ledgers: the most starts in
  # one window [s, s + per) opened by a start s, and how many such windows
  # held more than the limit; and how many starts were of a job that had
  # started before (a kill or a lost ack ran it again). A start killed
  # mid-run is still a start.
  def rate_windows
    starts = Dir[File.join(@dir, "rate-*")].flat_map do |f|
      File.readlines(f, chomp: true).filter_map do |line|
        kind, k, seq, time, pid = line.split
        [k, Float(time), seq] if pid && kind == "R"
      end
    end
    per, limit = TortureTask::Rated::PER, TortureTask::Rated::LIMIT
    counts = starts.group_by(&:first).values.flat_map do |list|
      times = list.map { |s| s[1] }.sort
      times.each_with_index.map { |t, i| times[i..].take_while { |u| u < t + per }.size }
    end
    [counts.max || 0, counts.count { |n| n > limit }, starts.size - starts.map(&:last).uniq.size]
  end

  # Rate logs that outlive their window: no expiry, an expiry longer than
  # the window, or a newest admission older than the window (Redis' clock).
  # A log expires one window after its last admission, so at the end the
  # only logs left are of admissions within the last window.
  def leftover_rate_logs
    seconds, micros = @redis.time
    now_ms = seconds * 1000 + micros / 1000
    window = SolidJobs::Configuration.rate_option(TortureTask::RATE).fetch(:window_ms)
    @redis.keys(key("rate:*")).count do |log|
      ttl = @redis.pttl(log)
      newest = @redis.lindex(log, -1)
      ttl.negative? || ttl > window || newest.nil? || Integer(newest) < now_ms - window
    end
  end

  # Wakes of keys with no throttled job left.
  def leftover_wakes
    @redis.zrange(key("flow:wake"), 0, -1).count { |hex| @redis.llen(key("throttled:#{hex}")).zero? }
  end

  # Runs of limited jobs beyond the limit: per key, the instants at which
  # more than 2 runs were open (counted once per excess start). A start is
  # closed by its own end in the same process, else by that process's kill.
  def limit_exceeded
    events = Dir[File.join(@dir, "flow-*")].flat_map do |f|
      File.readlines(f, chomp: true).filter_map do |line|
        kind, k, seq, time, pid = line.split
        [kind, k, seq, Float(time), Integer(pid)] if pid && %w[S E].include?(kind)
      end
    end
    ends = events.select { |e| e[0] == "E" }.group_by { |e| e[1..2] + [e[4]] }.transform_values { |l| l.map { |e| e[3] }.sort }
    points = Hash.new { |h, k| h[k] = [] }
    events.select { |e| e[0] == "S" }.sort_by { |e| e[3] }.each do |_, k, seq, time, pid|
      closing = ends.fetch([k, seq, pid], [])
      finish = closing.find { |t| t >= time }
      closing.delete(finish) if finish
      finish ||= @kill_times.fetch(pid, Float::INFINITY)
      points[k] << [time, 1] << [finish, -1]
    end
    points.values.sum do |list|
      open = 0
      list.sort_by { |t, d| [t, d] }.count { |_, d| (open += d) > 2 && d.positive? }
    end
  end
end
