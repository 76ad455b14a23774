# frozen_string_literal: true

require_relative "harness"
require_relative "measure"
require_relative "../../test/support/other_ruby"

module Bench
  # The systems under test, by the names BENCH_CLIENTS takes, behind one
  # interface every harness uses:
  #
  #   prepare(lab)               empty backend; this process configured as producer
  #   enqueue(job, *args)        one job now, through the system's own client API
  #   enqueue_many(job, lists)   many jobs now, in one call
  #   seed(job, lists)           every job of a drain, before the workers start
  #   start_workers(c, ...)      a started WorkerSet, through the system's own CLI
  #   release(workers, timeout)  let the workers at the seeded jobs (Sidekiq only)
  #   waiting                    jobs not yet taken by a worker
  #   drained?                   no job waiting or held; asked once waiting is 0
  #   counts                     {processed:, failed:} by the system's own counters,
  #                              complete once the workers stopped
  #   memory_mb                  what the backend holds in memory (soak)
  #   own_commands               Redis commands this process sent (probes)
  #   server_pids                the server processes the system needs
  #   finish                     nil, or what went wrong stopping a server
  #
  # `job` is a twin name of benchmark/jobs.rb ("Noop" is SidekiqNoop or
  # SolidNoop), so every system runs the same job bodies; a harness that
  # runs a system loads that file (after sidekiq, when it runs Sidekiq).
  class System
    SEED_BATCH = 1000
    JOBS_FILE = "./benchmark/jobs.rb"
    # The one channel (Sidekiq: queue) every benchmark job is on.
    CHANNEL = "bench"

    attr_reader :name, :label

    def initialize(name, label)
      @name = name
      @label = label
    end

    def prepare(lab)
      @lab = lab
      @own = Hash.new(0)
    end

    def job(twin) = Object.const_get("#{family == :sidekiq ? "Sidekiq" : "Solid"}#{twin}")
    def seed(job, lists) = lists.each_slice(SEED_BATCH) { |slice| enqueue_many(job, slice) }
    def release(_workers, _timeout) = nil
    def final_counts = counts
    def own_commands = @own
    def uses_redis? = true
    def finish = nil
    def cleanup = nil

    def server_pids = [@lab.redis_server.pid]

    private

    # Redis calls of this process, counted so they can be taken out of the
    # server's command statistics.
    def redis(command, *args)
      @own[command.to_s] += 1
      @lab.redis.public_send(command, *args)
    end

    def log_path(suffix = nil) = File.join(@lab.dir, "#{@name}#{suffix}.log")
  end

  # Sidekiq 6.4 through its own CLI: one process with N threads, or N
  # processes with one thread each (`processes`).
  class SidekiqSystem < System
    LIST = "queue:#{CHANNEL}".freeze
    # Jobs are seeded into a queue no worker watches and renamed into
    # "bench" once every process has booted: N Ruby processes booting on a
    # 2-core host take seconds, and the first one up would otherwise start
    # the clock while the others still compete with it for the CPU.
    STAGING_QUEUE = "staging"
    SIDEKIQ = Gem.bin_path("sidekiq", "sidekiq")

    def initialize(name, label, processes:)
      super(name, label)
      @processes = processes
    end

    def family = :sidekiq

    def prepare(lab)
      super
      lab.redis.flushall
      Sidekiq.configure_client { |config| config.redis = {url: lab.url} }
    end

    def enqueue(job, *args) = Sidekiq::Client.push("class" => job, "args" => args)
    def enqueue_many(job, lists) = Sidekiq::Client.push_bulk("class" => job, "args" => lists)

    def seed(job, lists)
      lists.each_slice(SEED_BATCH) do |slice|
        Sidekiq::Client.push_bulk("class" => job, "args" => slice, "queue" => STAGING_QUEUE)
      end
      @seeded = redis(:llen, "queue:#{STAGING_QUEUE}")
    end

    attr_reader :seeded

    def start_workers(concurrency, jobs_file: JOBS_FILE, env: {})
      # Sidekiq's own executable on the Ruby running the harness (`sidekiq`
      # on PATH may be another Ruby's binstub).
      command = ->(threads) { [RbConfig.ruby, SIDEKIQ, "-r", jobs_file, "-c", threads.to_s, "-q", CHANNEL] }
      env = env.merge("REDIS_URL" => @lab.url)
      workers = if @processes
                  Array.new(concurrency) do |i|
                    ChildProcess.new(command.(1), log: log_path("-#{i + 1}"), env: env, children: @lab.children)
                  end
                else
                  [ChildProcess.new(command.(concurrency), log: log_path, env: env, children: @lab.children)]
                end
      WorkerSet.new(workers.map(&:start))
    end

    # Every process adds itself to the "processes" set at its first
    # heartbeat, sent as its launcher starts the fetchers: by then it has
    # booted (Rails-less, the fetchers follow within milliseconds).
    def release(workers, timeout)
      deadline = Bench.now + timeout
      until redis(:scard, "processes") == workers.size
        if workers.exited?
          raise Failure, "a Sidekiq process exited (#{workers.exit_status}) before all #{workers.size} had booted"
        end
        raise Failure, "#{workers.size} Sidekiq processes did not all boot within #{timeout}s" if Bench.now > deadline

        sleep 0.05
      end
      redis(:rename, "queue:#{STAGING_QUEUE}", LIST)
    end

    def waiting = redis(:llen, LIST)

    # Sidekiq keeps no record of a fetched job: each thread fetches one at a
    # time, so once the queue is empty at most one job per thread is still
    # running (its processed counter is written only periodically, so it
    # cannot mark the end).
    def drained? = true

    # Written at each heartbeat and at exit.
    def counts = {processed: @lab.redis.get("stat:processed").to_i, failed: @lab.redis.get("stat:failed").to_i}
  end

  # SolidJobs through its CLI, one process, on Redis.
  class SolidRedisSystem < System
    LIST = "solid_jobs:channel:#{System::CHANNEL}".freeze

    def initialize(name, label, args: [])
      super(name, label)
      @args = args
    end

    def family = :solid

    # The same system with its workers on another Ruby (OtherRuby), under
    # the name "<name>@<version>"; this process still seeds and measures.
    def on_ruby(version)
      @ruby = OtherRuby.binary(version)
      @ruby_env = OtherRuby.env(@ruby)
      @name = "#{@name}@#{version}"
      @label = "#{@label}, workers on Ruby #{version}"
      self
    end

    def prepare(lab)
      super
      lab.redis.flushall
      SolidJobs.reset!
      configure_producer
    end

    def enqueue(job, *args) = job.enqueue(*args)
    def enqueue_many(job, lists) = job.enqueue_many(lists)
    def seeded = waiting

    # `args`: more CLI flags (the hybrid harness's thread workers).
    def start_workers(concurrency, jobs_file: JOBS_FILE, env: {}, args: [])
      worker = WorkerProcess.new(redis_url: @lab.url, namespace: nil, log: log_path, app: jobs_file,
                                 children: @lab.children, bundled: false, ruby: @ruby || RbConfig.ruby,
                                 args: ["--concurrency", concurrency.to_s, "--channel", CHANNEL, *@args, *args],
                                 env: {"SOLID_JOBS_LOG_LEVEL" => ENV.fetch("SOLID_JOBS_LOG_LEVEL", "info")}
                                   .merge(@ruby_env || {}, worker_env, env))
      WorkerSet.new([worker.start])
    end

    def waiting = redis(:llen, LIST)

    # A claim is removed only when its job completed, so drained means the
    # list and every claim hash are empty.
    def drained? = redis(:keys, "solid_jobs:claims:*").all? { |key| redis(:hlen, key).zero? }

    def counts
      {processed: @lab.redis.get("solid_jobs:metric:processed").to_i, failed: @lab.redis.get("solid_jobs:metric:failed").to_i}
    end

    # `blocked`: jobs the claims set aside over a concurrency limit
    # (benchmark/flow.rb); read once, after the run, never while it polls.
    def final_counts = counts.merge(blocked: @lab.redis.get("solid_jobs:metric:blocked").to_i)

    # used_memory: what Redis allocated for data, not its RSS, so the
    # allocator keeping freed pages neither hides nor fakes a trend.
    def memory_label = "Redis used MB"
    def memory_mb = Integer(@lab.redis.info("memory").fetch("used_memory")) / (1024.0 * 1024)

    private

    def configure_producer = SolidJobs.configure { |c| c.redis_url = @lab.url }
    def worker_env = {}
  end

  # SolidJobs on a fresh memory-durability SolidEngine server per case, so
  # no state (completed jobs are kept for a minute) carries over. Its
  # workers get the case's redis-server too: they must send it nothing, and
  # anything they did send would show in its command statistics.
  class SolidEngineSystem < SolidRedisSystem
    def prepare(lab)
      @server = EngineServer.new(dir: File.join(lab.dir, "engine-#{@cases = (@cases || 0) + 1}"), children: lab.children).start
      @client = SolidJobs::Native::EngineClient.new(@server.url, nil)
      super
    end

    attr_reader :server

    def uses_redis? = false
    def server_pids = [@server.pid]

    # Waiting jobs are ready or scheduled; a job the worker holds (prefetched
    # or running) is reserved until its ack. A fresh STATS for each question:
    # each answer then comes from one consistent snapshot.
    def waiting = stats.values_at("ready", "scheduled").sum
    def drained? = stats.values_at("ready", "scheduled", "reserved").sum.zero?

    def final_counts = counts

    def counts
      stats = stats()
      {processed: stats.fetch("acked_total"), failed: stats.fetch("failed_total") + stats.fetch("retried_total")}
    end

    # The server's RSS: it reports no memory figure of its own.
    def memory_label = "engine RSS MB"
    def memory_mb = ProcFacts.rss_mb(@server.pid)

    # STATS answers "key:value\r\n" lines; numeric values become Integers.
    def stats
      @client.call(["STATS"]).each_line(chomp: true).to_h do |line|
        key, value = line.split(":", 2)
        [key, Integer(value, exception: false) || value]
      end
    end

    # TERM, as in production; a server that needs KILL or exits non-zero
    # is a finding.
    def finish
      status = @server.stop
      return nil if status&.success?

      how = status ? "exited with #{status.inspect}" : "did not exit within #{EngineServer::STOP_TIMEOUT}s of TERM"
      "solid-engine-server #{how} after TERM; its log:\n#{@server.log_tail}"
    ensure
      @server.cleanup
    end

    def cleanup = @server&.cleanup

    private

    def configure_producer = Bench.use_engine(@server.url)

    # The CLI has only --redis-url: benchmark/jobs.rb points the worker at
    # the engine.
    def worker_env = {"BENCH_ENGINE_URL" => @server.url}
  end

  SYSTEMS = {
    "sidekiq" => -> { SidekiqSystem.new("sidekiq", "Sidekiq (1 process, N threads)", processes: false) },
    "sidekiq-procs" => -> { SidekiqSystem.new("sidekiq-procs", "Sidekiq (N processes, 1 thread)", processes: true) },
    "solid-jobs" => -> { SolidRedisSystem.new("solid-jobs", "SolidJobs on Redis (Ractors)") },
    "solid-jobs-engine" => -> { SolidEngineSystem.new("solid-jobs-engine", "SolidJobs on SolidEngine (Ractors)") },
    "solid-jobs-engine-threads" => lambda {
      SolidEngineSystem.new("solid-jobs-engine-threads", "SolidJobs on SolidEngine (threads)", args: %w[--execution-mode thread])
    }
  }.freeze

  # "solid-jobs@3.4": a SolidJobs system whose workers run on Ruby 3.4.
  OTHER_RUBY = /\A(?<base>solid-jobs[a-z-]*)@(?<version>\d+\.\d+)\z/

  def self.system(name)
    other = OTHER_RUBY.match(name)
    return SYSTEMS.fetch(name).call unless other

    SYSTEMS.fetch(other[:base]).call.on_ruby(other[:version])
  end

  # The names BENCH_CLIENTS takes: every system, and every SolidJobs system
  # on another Ruby.
  module ClientNames
    def self.include?(name) = SYSTEMS.key?(name) || SYSTEMS.key?(OTHER_RUBY.match(name)&.[](:base))
    def self.join(separator) = [*SYSTEMS.keys, "solid-jobs...@X.Y"].join(separator)

    # Table order: as SYSTEMS lists them, each system's other Rubies after it.
    def self.order(name)
      other = OTHER_RUBY.match(name)
      [SYSTEMS.keys.index(other ? other[:base] : name), other ? other[:version] : ""]
    end
  end

  # Started worker processes (one, or N single-threaded Sidekiqs) behind
  # one interface.
  class WorkerSet
    def initialize(workers)
      @workers = workers
    end

    def size = @workers.size
    def pids = @workers.map(&:pid)
    def exited? = @workers.any?(&:exited?)
    def exit_status = @workers.map(&:exit_status).compact.first

    # TERM to all at once: Sidekiq takes up to its 2 s fetch timeout to
    # stop, which one after another would cost seconds per process.
    # Returns how many did not stop cleanly (needed KILL, or exited with a
    # failure status). Safe to call again.
    def stop = @workers.map { |w| Thread.new { w.stop&.success? } }.count { |t| !t.value }

    # A worker that ignores TERM is a finding in itself.
    def stop!
      unclean = stop
      raise Failure, "#{unclean} worker process(es) did not stop cleanly on TERM:\n#{log_tail}" if unclean.positive?
    end

    def description = @workers.map(&:description).uniq.join("; ") + (size > 1 ? " (x#{size})" : "")

    def log_tail(lines = 30)
      @workers.map(&:log_tail).reject { |t| t == "(no output)" }.uniq.join("\n---\n").lines.last(lines).join
    end
  end
end
